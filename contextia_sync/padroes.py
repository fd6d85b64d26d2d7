"""
Os valores padrão do SDK, cada um num lugar só.

A ajuda do argparse, o `Contexto` do ouvinte, o transporte HTTP e as tabelas da
documentação leem daqui (um teste confere as tabelas de docs/ contra estes
números). Quem muda um padrão muda aqui, e o resto acompanha.

Módulo puro (só constantes): o `ouvinte.py --autoteste` roda num `python3 -S`.
"""

# -- ouvinte: ciclos --------------------------------------------------------
INTERVALO_DADOS = 60
"""Segundos entre leituras do que mudou (`--intervalo-dados`)."""

INTERVALO_PROJETOS = 300
"""Segundos entre buscas por empresa nova (`--intervalo-projetos`)."""

HORA_VARREDURA = '03:30'
"""Hora da carga completa diária, a única que remove (`--varredura`)."""

JANELA_VARREDURA = 180
"""Minutos depois da hora em que a varredura ainda pode disparar (`--janela-varredura`)."""

FOLGA = 180
"""Segundos que a leitura recua atrás da marca de água (`--folga`)."""

MAXIMO_POR_CICLO = 20000
"""Linhas mudadas num ciclo acima das quais o dataset vai para a varredura
(`--maximo-por-ciclo`)."""

TIMEOUT_FERRAMENTA = 7200
"""Tempo máximo, em segundos, de uma ferramenta rodada pelo ouvinte (`--timeout-ferramenta`)."""

INATIVIDADE_FERRAMENTA = 1800
"""Segundos sem nenhuma linha de saída após os quais a ferramenta e encerrada
(`--inatividade-ferramenta`)."""

TOLERANCIA_FUTURO = 300
"""Segundos além da hora da ORIGEM até onde a marca de água pode ir; carimbo
mais adiantado que isso é entregue, mas não sobe a marca."""

CHAVES_POR_LEITURA = 1000
"""Chaves por `WHERE key IN (...)` ao reler só as linhas novas da janela: o
máximo que o Oracle aceita numa lista (o SQL Server vai a 2100 parâmetros); menos
idas à origem numa rajada (issue 31)."""

TETO_ESPERA = 900
"""Teto, em segundos, da espera entre falhas seguidas do ciclo (dobra a cada falha)."""

ESTRATEGIA = 'coluna'
"""Estratégia de captura quando nem `--estrategia` nem `listener.strategy` dizem outra."""

INTERVALO_RECONCILIACAO = 300
"""Segundos entre duas reconciliações do mesmo dataset (`--intervalo-reconciliacao`):
o conjunto de chaves lido inteiro, comparado com o entregue, e o que sumiu removido.
Custa uma leitura de chaves da view inteira (só `key` e escopo, de preferência pelo
índice); 0 reconcilia a cada ciclo de dados."""

# -- carga e envio ----------------------------------------------------------
CHUNK = 500
"""Registros por lote enviado ao intake (`chunk` no mapeamento)."""

LOTES_EM_VOO = 4
"""Lotes da carga completa esperando resposta ao mesmo tempo (`--lotes-em-voo`;
1 = um de cada vez). Medido em bench/bench_velocidade.py: com um intake que leva
20 ms por resposta, 4 lotes em voo movem ~3x o que um de cada vez move."""

LINHAS_REPARTIDAS = 50000
"""Teto de linhas retidas nos buffers por empresa da carga de todas as empresas
(carga/todas.py): a leitura sem ordem põe cada linha, já como o JSON dela, no
buffer da empresa dela, que sai como lote ao chegar ao chunk; passando do teto,
os maiores saem antes, incompletos. ~16 MB numa view de 12 colunas (~310 bytes
por linha), mais os lotes em voo. Com os buffers desencontrados a soma fica
perto de S×chunk/2: até ~200 empresas de chunk 500 sem lote incompleto."""

NIVEL_GZIP = 1
"""Nível do gzip do corpo, quando o intake anuncia `compressão: ["gzip"]`:
o 1 já da ~7x menos bytes por ~0,7 us por registro (o 6 da 8,8x por 2 us)."""

GZIP_A_PARTIR_DE = 1024
"""Bytes de corpo a partir dos quais ele vai comprimido (abaixo, o gzip não paga)."""

VALIDADE_CAPACIDADES = 600
"""Segundos que o cliente guarda o que o intake anunciou em capacidades (compressão)."""

MAX_REMOCAO = 0.5
"""Fração de um dataset que uma carga pode remover sem permissão explicita (`--max-remocao`)."""

JANELA_TETO_REMOCAO_DIAS = 7
"""Dias (de calendário, mais hoje) em que a maior carga aceita de um dataset, na
empresa, é a base do teto de remoção: rodadas seguidas, cada uma dentro do
`--max-remocao`, não esvaziam o dataset aos poucos (carga/historico.py)."""

INTERVALO_PROGRESSO = 30.0
"""Segundos entre linhas de progresso do conector sem terminal (`CONTEXTIA_PROGRESSO_SEGUNDOS`)."""

SOURCE = 'generic'
"""O adaptador de origem (`--source`)."""

ESCOPO_MAXIMO = 64
"""Caracteres que um código de empresa pode ter (`escopos.problema_no_escopo`): o
cadastro que traz um código mais longo tem a empresa recusada, nunca provisionada."""

# -- origem -----------------------------------------------------------------
TIMEOUT_ORIGEM = 300
"""Segundos por consulta na origem (`CONTEXTIA_ORIGEM_TIMEOUT`; 0 desliga)."""

# -- transporte HTTP (a politica de retentativas, ver intake/transporte.py) --
TIMEOUT_CONEXAO = 5
"""Segundos para conectar ao Contextia, por tentativa."""

TIMEOUT_LEITURA = 120
"""Segundos esperando a resposta de um pedido, por tentativa."""

RETENTATIVAS = 6
"""Tentativas a mais por pedido (conexão, leitura e status somados)."""

BACKOFF = 0.5
"""Espera inicial entre tentativas; dobra a cada uma."""

BACKOFF_MAXIMO = 8.0
"""Teto da espera entre duas tentativas."""

PRAZO_RETENTATIVAS = 120
"""Prazo total de um pedido, tentativas e esperas somadas: passado ele, o lote conta como falho."""

RESPOSTA_MAXIMA_BYTES = 1024 * 1024
"""Bytes que o SDK lê de uma resposta do Contextia (contagens do intake,
`complete`, capacidades, `quem_sou`, admin), contados depois de descomprimir e
enquanto o corpo chega. Passado o limite, a conexão é fechada sem ler o resto e
o pedido conta como falha passageira (re-tentada dentro do prazo). O prazo do
pedido (PRAZO_RETENTATIVAS, `CONTEXTIA_PRAZO_ENVIO`) vale até o último byte do
corpo, não só até o cabeçalho."""

RESPOSTA_MAXIMA_BYTES_REGISTROS = 64 * 1024 * 1024
"""O mesmo limite para uma página de registros lida de volta (`ler_registros`,
1000 registros por página)."""

STATUS_RETENTAVEIS = (429, 502, 503, 504)
"""Status HTTP que passam sozinhos (sobrecarga, gateway): re-tentados dentro do prazo."""

STATUS_RECUSA_DO_REGISTRO = (400, 413, 422)
"""Status HTTP de recusa permanente do CONTEUDO de um lote: com a quarentena
ligada, o lote e dividido até o registro recusado ficar sozinho, e ele vai para
a quarentena (401/403, 409, 5xx e os passageiros nunca vão)."""

# -- quarentena: os registros que o intake recusou de vez (fila/quarentena.py) --
QUARENTENA_MAXIMO_ITENS = 1000
"""Registros que a quarentena guarda; cheia, ela recusa e o lote conta como falho."""

QUARENTENA_MAXIMO_BYTES = 256 * 1024 * 1024
"""Bytes que a quarentena ocupa no disco; cheia, ela recusa e o lote conta como falho."""

# -- a saude: `ouvinte.py --saude` (contextia_sync/saude.py) -----------------
SAUDE_INTERVALOS = 3
"""Quantos `--intervalo-dados` do ouvinte fazem os limites automaticos da saúde
(`--intervalos`): a idade do status e, no serviço, um dataset com falha sem ciclo bom."""

SAUDE_IDADE_MINIMA = TETO_ESPERA + 300
"""Piso, em segundos, da idade máxima do status (`--max-idade`): passa da espera
máxima entre falhas seguidas (TETO_ESPERA), quando o status fica parado de
propósito, e do cron de 5 minutos do `--once`."""

SAUDE_FALHAS = 3
"""Falhas seguidas (voltas do laço, ou de um dataset) que a saúde diz CRITICO;
de 1 até uma a menos e ALERTA (`--max-falhas`)."""

SAUDE_VARREDURA = 26 * 3600
"""Idade máxima, em segundos, da última varredura boa com a varredura diária
ligada (`--max-varredura`): um dia e a folga de uma varredura que demora."""

SAUDE_FERRAMENTA = TIMEOUT_FERRAMENTA + 600
"""Segundos de uma ferramenta rodando acima dos quais a saúde diz ALERTA
(`--max-ferramenta`): o tempo máximo padrão dela passou e ela não foi encerrada."""

# ------------------------------------------------------------ o spool da captura por log
SPOOL_MAXIMO_ITENS = 100000
"""Mudanças guardadas no spool (`<estado>/spool`) antes de a captura pausar e dizer."""

SPOOL_MAXIMO_BYTES = 512 * 1024 * 1024
"""Bytes do spool antes de a captura pausar (a posição do log para de avançar)."""

BINLOG_SERVER_ID = 4271
"""O server id com que o ouvinte se apresenta ao MariaDB (único entre as réplicas)."""

# ------------------------------------------------------------ o slot lógico (PostgreSQL)
SLOT_MENSAGENS = 20000
"""Mensagens do pgoutput lidas por bomba do `slot_logico` (um ciclo não fica preso
num WAL enorme; a transação nunca é cortada no meio)."""

SLOT_WAL_ALERTA = 1024 * 1024 * 1024
"""Bytes de WAL retidos pelo slot acima dos quais a saúde diz ALERTA (`--wal-alerta`)."""

SLOT_WAL_CRITICO = 8 * 1024 * 1024 * 1024
"""Bytes de WAL retidos pelo slot acima dos quais a saúde diz CRÍTICO (`--wal-critico`):
o disco do cliente está enchendo por nossa causa."""

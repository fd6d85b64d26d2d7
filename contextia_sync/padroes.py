"""
Os valores padrao do SDK, cada um num lugar so.

A ajuda do argparse, o `Contexto` do ouvinte, o transporte HTTP e as tabelas da
documentacao leem daqui (um teste confere as tabelas de docs/ contra estes
numeros). Quem muda um padrao muda aqui, e o resto acompanha.

Modulo puro (so constantes): o `ouvinte.py --autoteste` roda num `python3 -S`.
"""

# -- ouvinte: ciclos --------------------------------------------------------
INTERVALO_DADOS = 60
"""Segundos entre leituras do que mudou (`--intervalo-dados`)."""

INTERVALO_PROJETOS = 300
"""Segundos entre buscas por empresa nova (`--intervalo-projetos`)."""

HORA_VARREDURA = '03:30'
"""Hora da carga completa diaria, a unica que remove (`--varredura`)."""

JANELA_VARREDURA = 180
"""Minutos depois da hora em que a varredura ainda pode disparar (`--janela-varredura`)."""

FOLGA = 180
"""Segundos que a leitura recua atras da marca de agua (`--folga`)."""

MAXIMO_POR_CICLO = 20000
"""Linhas mudadas num ciclo acima das quais o dataset vai para a varredura
(`--maximo-por-ciclo`)."""

TIMEOUT_FERRAMENTA = 7200
"""Tempo maximo, em segundos, de uma ferramenta rodada pelo ouvinte (`--timeout-ferramenta`)."""

INATIVIDADE_FERRAMENTA = 1800
"""Segundos sem nenhuma linha de saida apos os quais a ferramenta e encerrada
(`--inatividade-ferramenta`)."""

TOLERANCIA_FUTURO = 300
"""Segundos alem da hora da ORIGEM ate onde a marca de agua pode ir; carimbo
mais adiantado que isso e entregue, mas nao sobe a marca."""

CHAVES_POR_LEITURA = 500
"""Chaves por `WHERE key IN (...)` ao reler so as linhas novas da janela (o
Oracle aceita ate 1000 numa lista)."""

TETO_ESPERA = 900
"""Teto, em segundos, da espera entre falhas seguidas do ciclo (dobra a cada falha)."""

ESTRATEGIA = 'coluna'
"""Estrategia de captura quando nem `--estrategia` nem `listener.strategy` dizem outra."""

# -- carga e envio ----------------------------------------------------------
CHUNK = 500
"""Registros por lote enviado ao intake (`chunk` no mapeamento)."""

MAX_REMOCAO = 0.5
"""Fracao de um dataset que uma carga pode remover sem permissao explicita (`--max-remocao`)."""

INTERVALO_PROGRESSO = 30.0
"""Segundos entre linhas de progresso do conector sem terminal (`CONTEXTIA_PROGRESSO_SEGUNDOS`)."""

SOURCE = 'generic'
"""O adaptador de origem (`--source`)."""

# -- origem -----------------------------------------------------------------
TIMEOUT_ORIGEM = 300
"""Segundos por consulta na origem (`CONTEXTIA_ORIGEM_TIMEOUT`; 0 desliga)."""

# -- transporte HTTP (a politica de retentativas, ver intake/transporte.py) --
TIMEOUT_CONEXAO = 5
"""Segundos para conectar ao Contextia, por tentativa."""

TIMEOUT_LEITURA = 120
"""Segundos esperando a resposta de um pedido, por tentativa."""

RETENTATIVAS = 6
"""Tentativas a mais por pedido (conexao, leitura e status somados)."""

BACKOFF = 0.5
"""Espera inicial entre tentativas; dobra a cada uma."""

BACKOFF_MAXIMO = 8.0
"""Teto da espera entre duas tentativas."""

PRAZO_RETENTATIVAS = 120
"""Prazo total de um pedido, tentativas e esperas somadas: passado ele, o lote conta como falho."""

STATUS_RETENTAVEIS = (429, 502, 503, 504)
"""Status HTTP que passam sozinhos (sobrecarga, gateway): re-tentados dentro do prazo."""

STATUS_RECUSA_DO_REGISTRO = (400, 413, 422)
"""Status HTTP de recusa permanente do CONTEUDO de um lote: com a quarentena
ligada, o lote e dividido ate o registro recusado ficar sozinho, e ele vai para
a quarentena (401/403, 409, 5xx e os passageiros nunca vao)."""

# -- quarentena: os registros que o intake recusou de vez (fila/quarentena.py) --
QUARENTENA_MAXIMO_ITENS = 1000
"""Registros que a quarentena guarda; cheia, ela recusa e o lote conta como falho."""

QUARENTENA_MAXIMO_BYTES = 256 * 1024 * 1024
"""Bytes que a quarentena ocupa no disco; cheia, ela recusa e o lote conta como falho."""

# -- a saude: `ouvinte.py --saude` (contextia_sync/saude.py) -----------------
SAUDE_INTERVALOS = 3
"""Quantos `--intervalo-dados` do ouvinte fazem os limites automaticos da saude
(`--intervalos`): a idade do status e, no servico, um dataset com falha sem ciclo bom."""

SAUDE_IDADE_MINIMA = TETO_ESPERA + 300
"""Piso, em segundos, da idade maxima do status (`--max-idade`): passa da espera
maxima entre falhas seguidas (TETO_ESPERA), quando o status fica parado de
proposito, e do cron de 5 minutos do `--once`."""

SAUDE_FALHAS = 3
"""Falhas seguidas (voltas do laco, ou de um dataset) que a saude diz CRITICO;
de 1 ate uma a menos e ALERTA (`--max-falhas`)."""

SAUDE_VARREDURA = 26 * 3600
"""Idade maxima, em segundos, da ultima varredura boa com a varredura diaria
ligada (`--max-varredura`): um dia e a folga de uma varredura que demora."""

SAUDE_FERRAMENTA = TIMEOUT_FERRAMENTA + 600
"""Segundos de uma ferramenta rodando acima dos quais a saude diz ALERTA
(`--max-ferramenta`): o tempo maximo padrao dela passou e ela nao foi encerrada."""

# ------------------------------------------------------------ o spool da captura por log
SPOOL_MAXIMO_ITENS = 100000
"""Mudanças guardadas no spool (`<estado>/spool`) antes de a captura pausar e dizer."""

SPOOL_MAXIMO_BYTES = 512 * 1024 * 1024
"""Bytes do spool antes de a captura pausar (a posição do log para de avançar)."""

BINLOG_SERVER_ID = 4271
"""O server id com que o ouvinte se apresenta ao MariaDB (único entre as réplicas)."""

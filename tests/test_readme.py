"""
O README acompanha o codigo: toda opcao de linha de comando esta documentada,
todo link aponta para um arquivo que existe, e os dois comandos vem primeiro.

(A ideia do primeiro teste e do sqlite-utils: opcao nova sem documentacao
quebra a suite, em vez de ser descoberta por um operador.)
"""

import os
import re
import subprocess
import sys

import pytest

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(RAIZ, 'README.md')

PROGRAMAS = [
    ('ouvinte.py',),
    ('connector.py',),
    ('provisionar.py',),
    ('demo/demo.py',),
    ('-m', 'contextia_local'),
]


def texto_readme():
    with open(README, encoding='utf-8') as f:
        return f.read()


def opcoes_do_help(argv):
    resultado = subprocess.run([sys.executable] + list(argv) + ['--help'], cwd=RAIZ,
                               capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, COLUMNS='200'))
    assert resultado.returncode == 0, resultado.stdout + resultado.stderr
    opcoes = set(re.findall(r'(?<![\w-])(--[a-z][a-z0-9-]*)', resultado.stdout))
    opcoes.discard('--help')
    return opcoes


@pytest.mark.parametrize('programa', PROGRAMAS, ids=lambda p: ' '.join(p))
def test_toda_opcao_de_linha_de_comando_esta_no_readme(programa):
    caminho = os.path.join(RAIZ, programa[0]) if programa[0] != '-m' else None
    if caminho and not os.path.exists(caminho):
        pytest.skip('%s ainda nao existe' % programa[0])
    opcoes = opcoes_do_help(programa)
    assert opcoes, 'nenhuma opcao achada no --help de %s' % ' '.join(programa)
    readme = texto_readme()
    faltam = sorted(o for o in opcoes
                    if not re.search(re.escape(o) + r'(?![a-z0-9-])', readme))
    assert faltam == [], 'opcoes de %s sem documentacao no README: %s' % (
        ' '.join(programa), ', '.join(faltam))


def test_os_dois_comandos_vem_antes_do_guia():
    readme = texto_readme()
    demo, teste = readme.find('make demo'), readme.find('make test')
    guia = readme.find('Guia de implanta')
    assert 0 <= demo < guia and 0 <= teste < guia
    # E bem no comeco: o primeiro bloco de codigo e o dos dois comandos.
    primeiro_bloco = readme[readme.find('```'):readme.find('```', readme.find('```') + 3)]
    assert 'make demo' in primeiro_bloco and 'make test' in primeiro_bloco


def test_links_relativos_apontam_para_arquivos_que_existem():
    readme = texto_readme()
    quebrados = []
    for alvo in re.findall(r'\]\(([^)#\s]+)(?:#[^)]*)?\)', readme):
        if re.match(r'[a-z]+:', alvo):
            continue
        if not os.path.exists(os.path.join(RAIZ, alvo)):
            quebrados.append(alvo)
    assert quebrados == []


def test_ancoras_internas_existem():
    readme = texto_readme()
    titulos = re.findall(r'^#+\s+(.+)$', readme, flags=re.M)

    def ancora(titulo):
        # Regra do GitHub: minusculas, sem pontuacao, espacos viram hifen.
        titulo = re.sub(r'[^\w\- ]', '', titulo.lower(), flags=re.U)
        return titulo.replace(' ', '-')

    existentes = {ancora(t) for t in titulos}
    faltam = [a for a in re.findall(r'\]\(#([^)]+)\)', readme) if a not in existentes]
    assert faltam == []


def test_todo_documento_de_docs_e_apontado_pelo_readme():
    pasta = os.path.join(RAIZ, 'docs')
    if not os.path.isdir(pasta):
        pytest.skip('docs/ ainda nao existe')
    readme = texto_readme()
    faltam = [n for n in sorted(os.listdir(pasta))
              if n.endswith('.md') and 'docs/' + n not in readme]
    assert faltam == []


def test_readme_cobre_o_guia_de_implantacao():
    readme = texto_readme()
    for trecho in (
            # Etapa 0: o GRANT de leitura em cada banco, e a janela
            'GRANT CREATE SESSION', 'GRANT SELECT ON SCHEMA::', "GRANT SELECT ON erp.",
            'default_transaction_read_only', '--janela-varredura',
            # mapeamento com schema, e o ensaio
            '"$schema": "./mapeamento.schema.json"', '--dry-run',
            # provisionar, carga, chaves
            '--varrer-agora', 'modo 600', 'chmod 600',
            # systemd e cron
            'deploy/ouvinte.service', 'systemd-analyze verify', 'NoNewPrivileges',
            'ProtectSystem=strict', 'ReadWritePaths', 'deploy/ouvinte.cron', '--once',
            # monitoramento
            'ouvinte-status.txt', 'find ', '-mmin', 'Códigos de saída',
            # ao vivo e estrategias
            'só na **varredura**', 'binlog', 'change_tracking', 'slot_logico', 'flashback',
            'reconciliacao',
            # dependencias e bancos so compilados
            'Dependências', 'só no nível do SQL compilado'):
        assert trecho in readme, trecho


def test_readme_cita_toda_mensagem_de_recusa_do_ouvinte():
    """Cada SystemExit que o operador pode ver no ouvinte tem linha na solucao de problemas."""
    readme = texto_readme()
    for inicio in ('Falta CONTEXTIA_URL', 'Arquivo de chaves nao existe',
                   'Ja existe um ouvinte rodando', 'Estado ilegivel em',
                   'ainda NAO esta implementada', 'nao existe', '--varredura espera HH:MM'):
        assert inicio in readme, inicio


def test_toda_dependencia_tem_o_porque_no_readme():
    readme = texto_readme()
    secao = readme[readme.index('# Dependências'):]
    secao = secao[:secao.index('\n# ', 3)].lower()
    faltam = []
    for arquivo in ('requirements.txt', 'requirements-dev.txt'):
        with open(os.path.join(RAIZ, arquivo), encoding='utf-8') as f:
            for linha in f:
                linha = linha.split('#')[0].strip()
                if not linha or linha.startswith('-'):
                    continue
                nome = re.split(r'[\[<>=!~ ;]', linha)[0].lower()
                if nome not in secao:
                    faltam.append(nome)
    assert faltam == [], 'dependencias sem o porque no README: %s' % ', '.join(faltam)


def test_exemplo_de_mapeamento_do_readme_e_valido(tmp_path):
    readme = texto_readme()
    bloco = re.search(r'```json\n(.*?)```', readme, flags=re.S).group(1)
    import json
    mapa = json.loads(bloco)
    assert mapa['$schema'] == './mapeamento.schema.json'
    caminho = tmp_path / 'cliente.json'
    caminho.write_text(bloco, encoding='utf-8')
    from contextia_sync.mapeamento import carregar_mapeamento
    carregado = carregar_mapeamento(str(caminho))
    assert [d['dataset'] for d in carregado['datasets']] == ['Titulos a Receber', 'Produtos']

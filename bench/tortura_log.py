"""
Os modos da tortura que leem o log de transação: `binlog` (MariaDB) e
`slot_logico` (PostgreSQL).

O servidor do sistema não tem o log ligado (log_bin=0, wal_level=replica): a
tortura sobe um servidor PRIVADO dos binários instalados, com o que a
estratégia exige, como os testes fazem (tests/apoio/mariadb_binlog.py,
tests/apoio/postgres_logico.py). O produto lê com o login SÓ LEITURA que o DBA
daria (SELECT e a replicação); a carga da tortura escreve pelo dono.
"""

import shutil
import tempfile

# A estrategia por log -> o banco dela.
BANCO = {'binlog': 'mariadb', 'slot_logico': 'postgres'}
# Onde o ouvinte grava a posicao do log (a primeira subida so a fixa).
ARQUIVO_DA_POSICAO = {'binlog': 'binlog-posicao.json', 'slot_logico': 'slot-posicao.json'}


def disponivel(estrategia):
    """(True, '') se os binários do servidor privado existem; (False, motivo) se não."""
    if estrategia == 'binlog':
        faltam = [b for b in ('mariadbd', 'mariadb-install-db') if shutil.which(b) is None]
        if faltam:
            return False, 'sem %s para o MariaDB privado com binlog' % ', '.join(faltam)
        return True, ''
    from tests.apoio.postgres_logico import binarios

    if binarios() is None or shutil.which('runuser') is None:
        return (
            False,
            'sem initdb/pg_ctl (ou runuser) para o PostgreSQL privado com wal_level=logical',
        )
    return True, ''


class ServidorPrivado:
    """O servidor com o log ligado, o banco da tortura nele e o login só leitura."""

    def __init__(self, estrategia):
        self.estrategia = estrategia
        self.tipo = BANCO[estrategia]
        self.pasta = tempfile.mkdtemp(prefix='tortura-%s-' % estrategia)
        self.servidor = None
        self.banco = None

    def iniciar(self):
        """Sobe o servidor e cria o banco. Devolve (nome, url do dono, url do leitor)."""
        if self.estrategia == 'binlog':
            from tests.apoio.mariadb_binlog import MariadbBinlog

            self.servidor = MariadbBinlog(self.pasta).iniciar()
        else:
            from tests.apoio.postgres_logico import PostgresLogico, binarios

            self.servidor = PostgresLogico(self.pasta, binarios()).iniciar()
        self.banco = self.servidor.banco_de_teste()
        return self.banco.nome, self.banco.url_admin, self.banco.url_origem

    def preparar_tabelas(self, datasets):
        """
        O que o DBA faz nas tabelas: com o slot, `REPLICA IDENTITY FULL` onde a
        empresa não está na chave primária (o DELETE tem de dizer de que empresa
        sai; docs/ouvinte.md). `datasets`: tortura_origem.DATASETS.
        """
        if self.estrategia != 'slot_logico':
            return
        for tabela, _chave, _colunas, recorte in datasets.values():
            if recorte:
                self.banco.admin('ALTER TABLE "%s" REPLICA IDENTITY FULL' % tabela)

    def ambiente_do_dba(self):
        """O que `--criar-slot` precisa: o login dono das tabelas (cria a publicação)."""
        if self.estrategia == 'slot_logico':
            return {'CONTEXTIA_ORIGEM_DBA': self.banco.url_admin}
        return {}

    def parar(self):
        if self.servidor is not None:
            self.servidor.parar()
            self.servidor = None
        shutil.rmtree(self.pasta, ignore_errors=True)

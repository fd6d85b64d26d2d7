"""
Ler o Contextia de volta: uma mudança só "chegou" quando da para le-la.

A latência da demo e medida assim -- do commit no ERP até o registro aparecer
na API de leitura do Contextia local --, e não deduzida do log do ouvinte.
"""

import decimal
import time


def _mesmo_valor(a, b):
    """'1234.5' == 1234.50 == Decimal('1234.50'); 'P' == 'P'."""
    if a is None or b is None:
        return a is None and b is None
    try:
        return decimal.Decimal(str(a)) == decimal.Decimal(str(b))
    except (decimal.InvalidOperation, ValueError):
        return str(a).strip() == str(b).strip()


class Observador:
    """Confere no Contextia local quais mudanças já estão visíveis."""

    def __init__(self, arquivo_chaves):
        from contextia_sync.provisionamento.chaves import ler_chaves

        self._ler_chaves = ler_chaves
        self.arquivo_chaves = arquivo_chaves

    def chaves(self):
        try:
            return self._ler_chaves(self.arquivo_chaves)
        except FileNotFoundError:
            return {}

    def registros(self, dataset, chave):
        from contextia_sync.intake.cliente import ler_registros

        return {str(r.get('ID')): r for r in ler_registros(dataset, chave)}

    def contagens(self, chave):
        from contextia_sync.intake.cliente import listar_datasets

        return {d['dataset']: d.get('records') for d in listar_datasets(chave)}

    def conferir(self, pendentes, varredura_comecou):
        """Marca `vista_em` nas mudanças que já aparecem. Devolve as que mudaram agora."""
        chaves = self.chaves()
        pares = {}
        for m in pendentes:
            for escopo in m.escopos:
                if escopo not in m.vista_em and escopo in chaves:
                    pares.setdefault((escopo, m.dataset), []).append(m)
        novidades = []
        agora = time.monotonic()
        for (escopo, dataset), mudancas in sorted(pares.items()):
            registros = self.registros(dataset, chaves[escopo])
            for m in mudancas:
                registro = registros.get(str(m.chave))
                if m.remocao:
                    # Ainda la antes da varredura e o esperado, nao uma falha.
                    if registro is None and varredura_comecou:
                        m.vista_em[escopo] = agora
                elif registro is not None and all(
                    _mesmo_valor(registro.get(c), v) for c, v in m.esperado.items()
                ):
                    m.vista_em[escopo] = agora
                if m.entregue and m not in novidades:
                    novidades.append(m)
        return novidades


def percentil(valores, fracao):
    """Percentil pelo posto mais próximo (p50, p95) -- sem interpolar."""
    if not valores:
        return None
    ordenados = sorted(valores)
    posto = max(1, int(-(-fracao * len(ordenados) // 1)))
    return ordenados[min(posto, len(ordenados)) - 1]

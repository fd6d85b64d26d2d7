"""O escopo (a empresa) como texto: a mesma empresa nao pode virar duas chaves."""

import decimal


def texto_escopo(valor: object) -> str:
    """
    O escopo como a chave do arquivo de chaves o escreve: texto, sem espacos.

    O ERP devolve 297 (int), Decimal('297') (Oracle NUMBER), 297.0 (float de
    driver), '297 ' (CHAR com preenchimento). Sao a mesma empresa; se cada
    forma virasse um texto diferente, a empresa 297 pareceria nova a cada
    ciclo e ninguem receberia os dados dela. Devolve '' para vazio.
    """
    if valor is None:
        return ''
    if isinstance(valor, bool):
        return str(int(valor))
    if isinstance(valor, float) and valor.is_integer():
        return str(int(valor))
    if isinstance(valor, decimal.Decimal) and valor == valor.to_integral_value():
        return str(valor.quantize(decimal.Decimal(1)))
    return str(valor).strip()

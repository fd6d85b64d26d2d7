"""
O Contextia local: um servidor que honra o contrato do intake do Contextia.

    python3 -m contextia_local --porta 8765 --dados /tmp/ctx --admin-token TOKEN

E o destino padrao da demo, o alvo de todos os testes e o ensaio que o
integrador roda antes de apontar o SDK para o Contextia de verdade. O contrato
esta em docs/contrato-intake.md; `processo.ServidorLocal` sobe um destes num
processo real (testes, demo, bench).
"""

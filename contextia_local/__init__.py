"""
O Contextia local: um servidor que honra o contrato do intake do Contextia.

    CONTEXTIA_ADMIN_TOKEN=TOKEN python3 -m contextia_local --porta 8765 --dados /tmp/ctx

E o destino padrão da demo, o alvo de todos os testes e o ensaio que o
integrador roda antes de apontar o SDK para o Contextia de verdade. O contrato
está em docs/contrato-intake.md; `processo.ServidorLocal` sobe um destes num
processo real (testes, demo, bench).
"""

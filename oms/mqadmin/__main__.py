"""``python -m oms.mqadmin``: the same as the ``mqadmin`` console script."""

from oms.mqadmin.startup import main

main()

"""The analysis of STaR runs, apart from the algorithm that makes them.

It reads what runs leave on disk (``metrics.json``, each iteration's ``test.json``, a base's
``thoughtsource_base.json``) and never imports the loop; the loop and the scratch model call its plots.

- :mod:`.accuracy`: an accuracy with its Wilson interval, two accuracies compared, the best iteration on dev
- :mod:`.compare_runs`: several runs (arms) side by side, as tables (``star compare``, ``star report``)
- :mod:`.plots`: the figures of a run, of several runs, of several seeds, of a scratch model's training
- :mod:`.seed_aggregate`: several seeds of one config pooled (``aggregate.json``)
- :mod:`.bootstrap_experiment`: the bootstrap experiment's report (paired McNemar tests per digit count)
"""

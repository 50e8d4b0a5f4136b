"""Reporting: what a finished run's files say, in tables, figures and documents.

* :mod:`.stats`: counts, lengths and n-gram overlap of a collection (``thoughtsource stats``);
  :mod:`.stats_plots` draws them;
* :mod:`.plots`: figures of an evaluation (accuracy per combination, trigger heatmap, reasoning lengths);
* :mod:`.results`: the results document of an evaluation (Markdown / JSON, lm-evaluation-harness-like tables);
* :mod:`.runs`: working with several run files at once (compare, merge, evaluate a folder, export prompts,
  length outliers, best cells of an accuracy pivot).
"""

"""The web viewer and multi-user annotator (``thoughtsource serve``).

``app.create_app(settings)`` builds the FastAPI app from ``settings.ServeSettings`` (validated there);
``routes``/``admin`` are thin handlers over ``presenters`` (the pages' view models); the ``db`` package stores
users, sessions, annotations and reviews in SQLite (WAL), one module per resource; ``auth`` hashes passwords,
manages sessions, CSRF tokens and role checks; ``similarity`` and ``agreement`` are the two computations behind
the sample and agreement pages.
"""

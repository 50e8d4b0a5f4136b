"""The web viewer and multi-user annotator (``thoughtsource serve``).

``app.create_app(settings)`` builds the FastAPI app; ``db`` stores users, sessions and annotations in
SQLite (WAL); ``auth`` hashes passwords, manages sessions, CSRF tokens and role checks;
``similarity`` and ``agreement`` are the two computations behind the sample and agreement pages.
"""

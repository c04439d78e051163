"""The `/ui` page: recent runs, one run's timeline, pending approvals (see `routes.py`)."""

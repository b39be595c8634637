"""The admin dashboard at /admin: ratings, thumbs-down answers, content gaps, stage latency, the answer
cache and the documents, for the IT team running the bot (admin/routes.py is the entry point)."""

from admin.routes import AdminRoutes

__all__ = ["AdminRoutes"]

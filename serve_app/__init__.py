"""The application: HTTP ingress, Python handle API, the dispatch pipeline (serving issue)."""

"""The dashboard's pages, one module per page family, each exporting ``routes``."""

"""Refreshable tables: FULL_RELOAD from an associated source, per-vnode sort-merge."""

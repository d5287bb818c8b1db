"""Subscription group commands: ``updateSubGroup``, ``deleteSubGroup``, ``groupList``."""

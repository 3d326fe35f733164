"""Folder of the ``agon_pass_at_k`` evaluate module (load it with ``evaluate.load`` on this folder)."""

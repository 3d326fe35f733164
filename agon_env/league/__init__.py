"""Cross-play between snapshots of the rivals: every (adapter, step) in both seats, rated.

:mod:`agon_env.league.games` holds what one pairing played (the shared vocabulary of the
runner and of the ratings); the runner plays pairings on held-out problems, the ratings turn
them into a cross-play matrix, drafter and challenger ratings with intervals and a
transitivity test, written as league.json and league.md beside their pictures.
"""

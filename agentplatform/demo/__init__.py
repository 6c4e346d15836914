"""The demo data of the whole project, loaded by `manage.py seed_demo`:

- `platform`: agents in every state, price history, wallets, a chat backlog and credentials;
- `sources`: local git repositories with documentation and a registry (sources.yml) listing them;
- `brand_assets`: a brand git repository and the brand-assets.yml that lists its assets;
- `git_repositories`: the git commits both of the last two are built from.
"""

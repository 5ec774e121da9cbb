# `nix flake init -t <sandcastle>#rust`: the files a Rust project needs to be
# worked on by sandcastle.
rec {
  rust = {
    path = ../templates/rust;
    description = "A Rust project set up for sandcastle (flake, .sandcastle/, triage workflow)";
    welcomeText = ''
      # sandcastle: Rust project

      Next steps:

      1. In `.sandcastle/config.toml` set `repo` and `forgeHost` to your forge
         repository, and in `flake.nix` point the `sandcastle` input at
         sandcastle; then `nix flake lock`.
      2. `cp .sandcastle/.env.example .sandcastle/.env` and fill it in:
         `ANTHROPIC_API_KEY` or `CLAUDE_CODE_OAUTH_TOKEN`, `FORGEJO_TOKEN`,
         `FORGEJO_USER`.
      3. Build and load the image, then start the loop:
         `nix run .#sandcastleImage | docker load && nix run .#sandcastle -- run`
    '';
  };
  default = rust;
}

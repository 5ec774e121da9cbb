# `nix flake init -t <sandcastle>#rust`: the files a Rust project needs to be
# worked on by sandcastle.
rec {
  rust = {
    path = ../templates/rust;
    description = "A Rust project set up for sandcastle (flake, .sandcastle/, triage workflow)";
    welcomeText = ''
      # sandcastle: Rust project

      Next steps (`<address>` is where sandcastle's flake lives, the one
      `nix registry add sandcastle <address>` was given):

      1. In `.sandcastle/config.toml` set `repo` and `forgeHost` to your forge
         repository, and in `flake.nix` set `inputs.sandcastle.url` to
         `<address>`; then `git add -A && nix flake lock`.
         `nix run .#sandcastle -- doctor` points at any placeholder left.
      2. `cp .sandcastle/.env.example .sandcastle/.env` and fill it in.
      3. Build and load the image, then start the loop:
         `nix run .#sandcastleImage | docker load && nix run .#sandcastle`
    '';
  };
  default = rust;
}

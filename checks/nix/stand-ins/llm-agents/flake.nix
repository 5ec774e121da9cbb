# Stand-in for numtide/llm-agents.nix, for offline evaluation tests only.
# Like the real flake it has packages for these three systems only.
{
  description = "llm-agents stand-in";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixpkgs-unstable";

  outputs = { nixpkgs, ... }: {
    packages = nixpkgs.lib.genAttrs [ "x86_64-linux" "aarch64-linux" "aarch64-darwin" ] (system: {
      claude-code =
        derivation
          {
            name = "claude-code";
            inherit system;
            builder = "/bin/sh";
            args = [ "-c" "exit 1" ];
          } // {
          meta.mainProgram = "claude";
          standIn = { function = "llm-agents.claude-code"; arguments = { }; };
        };
    });
  };
}

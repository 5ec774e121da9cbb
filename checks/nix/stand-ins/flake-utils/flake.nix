# Stand-in for numtide/flake-utils (eachSystem / eachDefaultSystem /
# defaultSystems with the real semantics), for offline evaluation tests only.
{
  description = "flake-utils stand-in";

  outputs = _:
    let
      defaultSystems = [ "aarch64-linux" "aarch64-darwin" "x86_64-darwin" "x86_64-linux" ];
      # { packages.<system> = ...; lib.<system> = ...; } from a per-system function.
      eachSystem = systems: f:
        builtins.foldl'
          (acc: system:
            let outputs = f system;
            in acc // builtins.mapAttrs
              (name: value: (acc.${name} or { }) // { ${system} = value; })
              outputs)
          { }
          systems;
    in
    {
      lib = {
        inherit defaultSystems eachSystem;
        eachDefaultSystem = eachSystem defaultSystems;
      };
    };
}

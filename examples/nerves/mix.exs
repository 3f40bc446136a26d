# examples/nerves: a Nerves project's mix.exs for the Radxa Dragon Q6A with hexagon_tpu. What
# hexagon_tpu adds is marked "hexagon_tpu"; the rest is a Nerves project's usual mix.exs.
defmodule MyApp.MixProject do
  use Mix.Project

  @app :my_app
  @version "0.1.0"
  @all_targets [:dragon_q6a]

  def project do
    [
      app: @app,
      version: @version,
      elixir: "~> 1.17",
      archives: [nerves_bootstrap: "~> 1.13"],
      start_permanent: Mix.env() == :prod,
      deps: deps(),
      releases: [{@app, release()}],
      preferred_cli_target: [run: :host, test: :host]
    ]
  end

  def application do
    [extra_applications: [:logger, :runtime_tools], mod: {MyApp.Application, []}]
  end

  defp deps do
    [
      {:nerves, "~> 1.13", runtime: false},
      {:shoehorn, "~> 0.9"},
      {:ring_logger, "~> 0.11"},
      {:toolshed, "~> 0.4"},
      {:nerves_runtime, "~> 0.13"},
      {:nerves_pack, "~> 0.7", targets: @all_targets},

      # hexagon_tpu: the NPU. Its NIF is precompiled: rustler_precompiled downloads the
      # aarch64-unknown-linux-gnu build when the project compiles for the board (the system
      # sets TARGET_ARCH=aarch64, TARGET_OS=linux, TARGET_ABI=gnu) and checks its checksum.
      {:hexagon_tpu, "~> 0.2"},
      # hexagon_tpu: tensors in and out, and Nx.Serving (MyApp.Application); optional.
      {:nx, "~> 0.7"},

      # The system, as its README says to depend on it.
      {:nerves_system_dragon_q6a,
       path: "../nerves_system_dragon_q6a", runtime: false, targets: :dragon_q6a}
    ]
  end

  def release do
    [
      overwrite: true,
      cookie: "#{@app}_cookie",
      include_erts: &Nerves.Release.erts/0,
      # hexagon_tpu: check_nif/1 after :assemble.
      steps: [&Nerves.Release.init/1, :assemble, &check_nif/1],
      strip_beams: Mix.env() == :prod or [keep: ["Docs"]]
    ]
  end

  # hexagon_tpu: fails the build, not the board, when the release's NIF is not an aarch64
  # shared object (ELF machine 183), e.g. a NIF fetched for the build machine because the
  # TARGET_* variables were not set. Such a NIF would not load on the device: the VM still
  # boots, but every hexagon_tpu call answers :nif_not_loaded.
  defp check_nif(release) do
    nifs = Path.wildcard(Path.join(release.path, "lib/hexagon_tpu-*/priv/native/*.so"))

    if nifs == [],
      do: Mix.raise("the release has no hexagon_tpu NIF (lib/hexagon_tpu-*/priv/native)")

    for nif <- nifs do
      case File.open!(nif, [:read, :binary], &IO.binread(&1, 20)) do
        <<0x7F, "ELF", 2, 1, _::binary-size(12), 183::little-16>> ->
          :ok

        _ ->
          Mix.raise("#{nif} is not an aarch64 shared object: is TARGET_ARCH=aarch64 set?")
      end
    end

    release
  end
end

defmodule HexagonTpu.MixProject do
  use Mix.Project

  @version "0.2.0"
  @source_url "https://github.com/monoflow-ayvu/hexagon_tpu"

  def project do
    [
      app: :hexagon_tpu,
      version: @version,
      elixir: "~> 1.14",
      start_permanent: Mix.env() == :prod,
      elixirc_paths: elixirc_paths(Mix.env()),
      deps: deps(),
      description:
        "Qualcomm Hexagon NPU (QNN HTP) inference for Elixir and Nerves: " <>
          "pre-compiled QNN context binaries, Nx tensors in and out",
      package: package(),
      docs: docs(),
      source_url: @source_url
    ]
  end

  def application do
    [extra_applications: extra_applications(Mix.env()), mod: {HexagonTpu.Application, []}]
  end

  # The suite serves a NIF artifact over HTTP and checksums it
  # (test/nif_not_loaded_hex_test.exs); Mix keeps other applications off the code path.
  defp extra_applications(:test), do: [:logger, :inets, :crypto]
  defp extra_applications(_), do: [:logger]

  defp elixirc_paths(:test), do: ["lib", "test/support"]
  defp elixirc_paths(_), do: ["lib"]

  # HEXAGON_TPU_OFFLINE=1 builds with none of the Hex packages but nimble_options (machines
  # without hex.pm, air-gapped Nerves builds): the NIF comes from priv/native/ (built with
  # cargo), Nx integration is left out and telemetry calls are no-ops; nimble_options comes from
  # its sources in HEXAGON_TPU_OFFLINE_DEPS/nimble_options when that is set, else from Hex.
  # HEXAGON_TPU_HEX_SOURCES=DIR keeps Hex mode but takes each Hex package from its sources in
  # DIR/<name> (../shared/hex in CI: .ci/elixir-1.18.sh), as a path dependency with
  # override: true, with the packages they need in turn; Hex must be installed and
  # HEX_OFFLINE=1 set. See guides/developing.md, "Build modes".
  defp deps do
    cond do
      offline?() -> offline_deps()
      sources = hex_sources() -> from_sources(hex_deps(), sources)
      true -> hex_deps()
    end
  end

  defp hex_deps do
    [
      {:rustler_precompiled, "~> 0.8"},
      {:rustler, ">= 0.36.2", optional: true},
      {:telemetry, "~> 1.3"},
      {:telemetry_metrics, "~> 1.0", optional: true},
      {:nx, "~> 0.7", optional: true},
      {:nimble_options, "~> 1.1"},
      {:ex_doc, "~> 0.34", only: :dev, runtime: false}
    ]
  end

  # What the packages above need from Hex in turn (rustler_precompiled: castore; rustler: jason;
  # nx: complex), which a path dependency's own Hex requirements would otherwise fetch.
  @nested [:castore, :jason, :complex]

  # What ex_doc needs in turn, for `mix docs`.
  @nested_docs [:earmark_parser, :makeup, :makeup_elixir, :makeup_erlang, :nimble_parsec]

  # Each dependency whose sources are in `dir` as a path one (its version requirement kept and
  # checked), the others left out. From sources (CI), the docs' :dev dependencies are :test ones
  # too, so that the test environment builds the docs with its own NIF build.
  defp from_sources(deps, dir) do
    nested =
      Enum.map(@nested, &{&1, ">= 0.0.0"}) ++
        Enum.map(@nested_docs, &{&1, ">= 0.0.0", only: :dev, runtime: false})

    for dep <- deps ++ nested,
        {name, requirement, opts} = with({name, req} <- dep, do: {name, req, []}),
        path = Path.join(dir, Atom.to_string(name)),
        File.dir?(path) do
      opts = if opts[:only] == :dev, do: Keyword.put(opts, :only, [:dev, :test]), else: opts
      {name, requirement, Keyword.merge(opts, path: path, override: true)}
    end
  end

  # What an offline build cannot do without: nimble_options declares and checks the options of
  # every public function (HexagonTpu.Args).
  @offline [:nimble_options]

  defp offline_deps do
    deps = Enum.filter(hex_deps(), &(elem(&1, 0) in @offline))

    case System.get_env("HEXAGON_TPU_OFFLINE_DEPS") do
      dir when dir in [nil, ""] ->
        deps

      dir ->
        for {name, requirement} <- deps do
          path = Path.join(Path.expand(dir), Atom.to_string(name))

          File.dir?(path) ||
            Mix.raise(
              "HEXAGON_TPU_OFFLINE_DEPS=#{dir} holds no #{name}/ (the sources of the Hex " <>
                "package #{name} #{requirement}, which an offline build needs)"
            )

          {name, requirement, path: path}
        end
    end
  end

  defp hex_sources do
    case System.get_env("HEXAGON_TPU_HEX_SOURCES") do
      dir when dir in [nil, ""] -> nil
      dir -> Path.expand(dir)
    end
  end

  defp offline?, do: System.get_env("HEXAGON_TPU_OFFLINE") in ["1", "true"]

  defp package do
    [
      licenses: ["Apache-2.0"],
      links: %{"GitHub" => @source_url},
      files: [
        "lib",
        # the compile task's Python script and its pins (priv/native is not shipped: the NIF
        # comes from rustler_precompiled or a local build)
        "priv/compile",
        "native/hexagon_tpu_nif/src",
        "native/hexagon_tpu_nif/qnn/src",
        "native/hexagon_tpu_nif/qnn/Cargo.toml",
        "native/hexagon_tpu_nif/qnn_sys/src",
        "native/hexagon_tpu_nif/qnn_sys/Cargo.toml",
        "native/hexagon_tpu_nif/Cargo.toml",
        "native/hexagon_tpu_nif/Cargo.lock",
        "checksum-*.exs",
        "mix.exs",
        "README.md",
        "CHANGELOG.md",
        "LICENSE",
        "NOTICE"
      ]
    ]
  end

  # The guides and notes, in reading order, by group (the extras are these, in this order).
  @extra_groups [
    "Start here": ["README.md", "guides/getting-started.md"],
    Guides: [
      "guides/inference.md",
      "docs/models.md",
      "docs/preflight.md",
      "guides/camera-frames.md",
      "guides/nerves.md",
      "guides/observability.md",
      "docs/bench.md"
    ],
    "Developing hexagon_tpu": [
      "guides/developing.md",
      "docs/firmware.md",
      "docs/fuzzing.md",
      "ARCHITECTURE.md"
    ],
    "Release notes": ["CHANGELOG.md"]
  ]

  # Every page of the docs: the guides in reading order, then the modules by what they are for.
  # `mix docs --warnings-as-errors` builds them in CI (.ci/elixir-1.18.sh), and
  # test/docs_code_test.exs keeps the guides' Elixir blocks parsing.
  defp docs do
    [
      main: "readme",
      source_ref: "v#{@version}",
      # ARCHITECTURE.md and docs/fuzzing.md name internal modules and functions (`@moduledoc
      # false`, `@doc false`): code, not links.
      skip_code_autolink_to: &hidden_reference?/1,
      extras: Enum.flat_map(@extra_groups, &elem(&1, 1)),
      groups_for_extras: @extra_groups,
      groups_for_modules: [
        Core: [
          HexagonTpu,
          HexagonTpu.Runtime,
          HexagonTpu.Context,
          HexagonTpu.Graph,
          HexagonTpu.Pending,
          HexagonTpu.TensorInfo,
          HexagonTpu.Tensor,
          HexagonTpu.Performance,
          HexagonTpu.Serving
        ],
        "Camera frames": [
          HexagonTpu.Preprocess,
          HexagonTpu.Preprocess.Frame,
          HexagonTpu.Preprocess.Transform,
          HexagonTpu.Postprocess,
          HexagonTpu.Postprocess.Detection,
          HexagonTpu.Pipeline
        ],
        Models: [HexagonTpu.Compiler, HexagonTpu.ModelInfo, HexagonTpu.Quality],
        Devices: [
          HexagonTpu.Diagnosis,
          HexagonTpu.Diagnosis.Check,
          HexagonTpu.DeviceRuntime,
          HexagonTpu.Elf
        ],
        "Measuring and observability": [
          HexagonTpu.Bench,
          HexagonTpu.Stats,
          HexagonTpu.Monitor,
          HexagonTpu.Telemetry,
          HexagonTpu.Profile,
          HexagonTpu.Trace,
          HexagonTpu.QnnLog
        ],
        Errors: [HexagonTpu.Error],
        "Mix tasks": [
          Mix.Tasks.HexagonTpu.Compile,
          Mix.Tasks.HexagonTpu.Inspect,
          Mix.Tasks.HexagonTpu.Runtime,
          Mix.Tasks.HexagonTpu.Doctor,
          Mix.Tasks.HexagonTpu.Bench
        ]
      ]
    ]
  end

  # Code the docs name but do not link: a module with `@moduledoc false` (the tests' support
  # modules too, compiled where the docs are built in CI) or a function with `@doc false`.
  defp hidden_reference?(ref) do
    case Regex.run(~r{^((?:[A-Z]\w*\.)*[A-Z]\w*)(?:\.([a-z_]\w*[!?]?)/(\d+))?$}, ref) do
      [_, module] -> hidden_doc?(Module.concat([module]), nil)
      [_, module, function, arity] -> hidden_doc?(Module.concat([module]), {function, arity})
      nil -> false
    end
  end

  defp hidden_doc?(module, function) do
    case {Code.fetch_docs(module), function} do
      {{:docs_v1, _, _, _, :hidden, _, _}, _} ->
        true

      {{:docs_v1, _, _, _, _, _, docs}, {name, arity}} ->
        Enum.any?(docs, fn {{_kind, f, a}, _, _, doc, _} ->
          {Atom.to_string(f), Integer.to_string(a), doc} == {name, arity, :hidden}
        end)

      _ ->
        false
    end
  end
end

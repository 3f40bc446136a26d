defmodule HexagonTpu.ModelInfo do
  @moduledoc """
  Everything a QNN context binary says about itself, read with the QnnSystem library alone (no
  backend, no device): `HexagonTpu.inspect_model/2` and `mix hexagon_tpu.inspect` return it.

    * `:build_id` - the build id of the QAIRT that made the binary (`"v2.51.0.260929181845"`),
      and `:qairt_version` its `major.minor.patch` (`"2.51.0"`; `nil` when it does not parse)
    * `:core_api`, `:backend_api`, `:context_blob_version` - versions as `"major.minor.patch"`
    * `:backend_id` - the backend it was made for (6 is the HTP)
    * `:soc_model` - the SoC model it was compiled for (35 is the QCS6490; 0 when the compile
      set none; `nil` before BinaryInfo v3), `:soc_version` the SoC string, if any
    * `:dsp_arch` - the HTP architecture (68 for v68), `:vtcm_size` the largest VTCM its graphs
      ask for, in bytes; `nil` when the binary does not say
    * `:graphs` - each graph's name, inputs and outputs (`HexagonTpu.TensorInfo`)
    * `:loads_on` - what a runtime needs for it to load, from the pre-flight rules
      ([`docs/preflight.md`](preflight.md)): `["QAIRT >= 2.51.0", "HTP (6) backend", "SoC model 35", "HTP v68",
      "VTCM >= 4194304 bytes"]`
  """

  alias HexagonTpu.Context

  defstruct [
    :path,
    :binary_info_version,
    :build_id,
    :qairt_version,
    :core_api,
    :backend_api,
    :context_blob_version,
    :backend_id,
    :soc_version,
    :soc_model,
    :dsp_arch,
    :vtcm_size,
    graphs: [],
    loads_on: []
  ]

  @type t :: %__MODULE__{
          path: String.t(),
          binary_info_version: 1..3,
          build_id: String.t(),
          qairt_version: String.t() | nil,
          core_api: String.t(),
          backend_api: String.t(),
          context_blob_version: String.t(),
          backend_id: non_neg_integer(),
          soc_version: String.t(),
          soc_model: non_neg_integer() | nil,
          dsp_arch: non_neg_integer() | nil,
          vtcm_size: non_neg_integer() | nil,
          graphs: [Context.graph_info()],
          loads_on: [String.t()]
        }

  @doc false
  # From the NIF's map.
  def new(path, %{} = info), do: struct!(__MODULE__, Map.put(info, :path, path))

  @doc "A report for people, one fact a line (what `mix hexagon_tpu.inspect` prints)."
  @spec format(t()) :: String.t()
  def format(%__MODULE__{} = info) do
    header = [
      "#{info.path}",
      "  build id:        #{blank(info.build_id)}" <>
        if(info.qairt_version, do: " (QAIRT #{info.qairt_version})", else: ""),
      "  core API:        #{info.core_api}",
      "  backend API:     #{info.backend_api} (backend id #{info.backend_id})",
      "  context blob:    #{info.context_blob_version} (BinaryInfo v#{info.binary_info_version})",
      "  SoC model:       #{opt(info.soc_model)}" <>
        if(info.soc_version not in [nil, ""], do: " (#{info.soc_version})", else: ""),
      "  HTP arch:        #{opt(info.dsp_arch, &"v#{&1}")}",
      "  VTCM:            #{opt(info.vtcm_size, &"#{&1} bytes")}",
      "  loads on:        #{Enum.join(info.loads_on, ", ")}"
    ]

    graphs =
      Enum.flat_map(info.graphs, fn g ->
        ["  graph #{inspect(g.name)}"] ++
          Enum.map(g.inputs, &"    input  #{inspect(&1)}") ++
          Enum.map(g.outputs, &"    output #{inspect(&1)}")
      end)

    Enum.join(header ++ graphs, "\n")
  end

  defp blank(""), do: "(none)"
  defp blank(s), do: s
  defp opt(value, fun \\ &to_string/1)
  defp opt(nil, _fun), do: "(not recorded)"
  defp opt(value, fun), do: fun.(value)
end

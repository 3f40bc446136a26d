defmodule HexagonTpu.Diagnosis.Dsp do
  @moduledoc false
  # The doctor's checks of the DSP side (HexagonTpu.Diagnosis): the FastRPC device node, the
  # cdsprpcd daemon and the remote heap, read from /dev, /proc and the device tree under a
  # root (nil: this machine's).

  alias HexagonTpu.Diagnosis.Check

  # bounds on what is read: /proc's entries, the device tree's depth and entries
  @max_proc_entries 65_536
  @max_tree_depth 6
  @max_tree_entries 20_000

  @doc false
  # `path` under the root the doctor reads (nil: this machine's).
  def in_root(nil, path), do: path
  def in_root(root, path), do: Path.join(root, path)

  @doc false
  def fastrpc_device(root) do
    dev = in_root(root, "/dev")

    candidates =
      case File.ls(dev) do
        {:ok, names} ->
          names
          |> Enum.filter(&(String.starts_with?(&1, "fastrpc-cdsp") or &1 == "adsprpc-smd"))
          |> Enum.sort()
          |> Enum.map(&Path.join(dev, &1))

        {:error, _} ->
          []
      end

    results = Enum.map(candidates, &{&1, open_device(&1)})

    case Enum.find(results, &match?({_, :ok}, &1)) do
      {path, :ok} ->
        Check.ok(:fastrpc_device, "#{path} opens")

      nil when results == [] ->
        if root != nil and not File.dir?(dev),
          do: not_running(:fastrpc_device, root, dev),
          else:
            Check.error(
              :fastrpc_device,
              "no #{dev}/fastrpc-cdsp* or #{dev}/adsprpc-smd",
              "use a kernel with the FastRPC driver and the CDSP enabled in the device tree"
            )

      nil ->
        Check.error(
          :fastrpc_device,
          Enum.map_join(results, "; ", fn {path, {:error, why}} -> "#{path} #{why}" end),
          "give this user read-write access to the FastRPC device (a udev rule or mdev.conf)"
        )
    end
  end

  defp open_device(path) do
    case File.stat(path) do
      {:ok, %File.Stat{type: :device}} ->
        case :file.open(path, [:read, :write, :raw]) do
          {:ok, file} ->
            :file.close(file)
            :ok

          {:error, reason} ->
            {:error, "cannot be opened: #{:file.format_error(reason)}"}
        end

      {:ok, %File.Stat{type: type}} ->
        {:error, "is a #{type}, not a device"}

      {:error, :enoent} ->
        {:error, "is a dangling symlink"}

      {:error, reason} ->
        {:error, "cannot be read: #{:file.format_error(reason)}"}
    end
  end

  @doc false
  def cdsprpcd(root) do
    proc = in_root(root, "/proc")

    found =
      case File.ls(proc) do
        {:ok, names} ->
          names
          |> Stream.filter(&pid?/1)
          |> Stream.take(@max_proc_entries)
          |> Enum.find(&(comm(Path.join([proc, &1, "comm"])) == "cdsprpcd"))

        {:error, _} ->
          nil
      end

    cond do
      found ->
        Check.ok(:cdsprpcd, "running (pid #{found})")

      root != nil and not File.dir?(proc) ->
        not_running(:cdsprpcd, root, proc)

      true ->
        Check.error(
          :cdsprpcd,
          "no cdsprpcd process in #{proc}",
          "start cdsprpcd (Qualcomm's FastRPC daemon for the CDSP) before the VM uses the NPU"
        )
    end
  end

  defp pid?(name), do: name != "" and String.match?(name, ~r/^\d+$/)

  defp comm(path) do
    with {:ok, %File.Stat{type: :regular}} <- File.stat(path),
         {:ok, file} <- :file.open(path, [:read, :raw, :binary]) do
      try do
        case :file.read(file, 64) do
          {:ok, bytes} -> String.trim_trailing(bytes, "\n")
          _ -> nil
        end
      after
        :file.close(file)
      end
    else
      _ -> nil
    end
  end

  @doc false
  def remote_heap(root) do
    places = Enum.map(["/proc/device-tree", "/sys/firmware/devicetree/base"], &in_root(root, &1))
    mounts = Enum.map(["/proc", "/sys"], &in_root(root, &1))

    case Enum.filter(places, &File.dir?/1) do
      [] ->
        if root == nil or Enum.any?(mounts, &File.dir?/1),
          do: no_device_tree(places),
          else: not_running(:remote_heap, root, Enum.join(mounts, " or "))

      [tree | _] ->
        case find_node(tree) do
          {:found, path} ->
            Check.ok(:remote_heap, path)

          {:not_found, visited} ->
            Check.error(
              :remote_heap,
              "no cdsp-rpc-remote-heap node in #{tree} (#{visited} entries searched)",
              "use a device tree with the CDSP remote heap (cdsp-rpc-remote-heap) node"
            )
        end
    end
  end

  defp no_device_tree(places) do
    Check.error(
      :remote_heap,
      "no device tree (#{Enum.join(places, ", ")})",
      "boot with a device tree that has the CDSP's cdsp-rpc-remote-heap node"
    )
  end

  # `root` lacks `path`, which the kernel provides on a running system (/dev, /proc, /sys): it
  # is an overlay or an image, and its devices, processes and device tree exist only on the board.
  defp not_running(name, root, path) do
    Check.error(
      name,
      "no #{path}: #{root} is not the root of a running system",
      "run the doctor on the board (HexagonTpu.diagnose/1 in IEx)"
    )
  end

  # Breadth-first, directories only, symlinks not followed, bounded in depth and entries.
  defp find_node(tree), do: find_node([{tree, 0}], 0)

  defp find_node([], visited), do: {:not_found, visited}

  defp find_node(_queue, visited) when visited >= @max_tree_entries,
    do: {:not_found, visited}

  defp find_node([{dir, depth} | queue], visited) do
    names = if depth < @max_tree_depth, do: ls(dir), else: []

    case Enum.find(names, &String.contains?(&1, "cdsp-rpc-remote-heap")) do
      nil ->
        children =
          for name <- names,
              path = Path.join(dir, name),
              match?({:ok, %File.Stat{type: :directory}}, File.lstat(path)),
              do: {path, depth + 1}

        find_node(queue ++ children, visited + length(names))

      name ->
        {:found, Path.join(dir, name)}
    end
  end

  defp ls(dir) do
    case File.ls(dir) do
      {:ok, names} -> Enum.sort(names)
      {:error, _} -> []
    end
  end
end

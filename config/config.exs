# This repository's own dev/test settings. The library itself reads no application
# environment: runtime knobs are function options (see HexagonTpu.Runtime).
import Config

if config_env() == :test do
  config :logger, level: :warning
end

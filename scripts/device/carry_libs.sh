# Sourced by the device scripts that carry release binaries to the GPU
# machine, which has neither RocksDB nor hiredis. Needs $pack set.

# Libraries every Linux has, and the loader's own: never carried.
system_lib() {
  case "$(basename "$1")" in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux* | \
      libstdc++.so.* | libgcc_s.so.*) return 0 ;;
  esac
  return 1
}

# BINARY DEST_NAME: the binary into $pack/bin (stripped), the libraries it
# links into $pack/lib.
carry_with_libs() {
  cp "$1" "$pack/bin/$2"
  strip "$pack/bin/$2"
  ldd "$1" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
    system_lib "$lib" || cp -L "$lib" "$pack/lib/"
  done
}

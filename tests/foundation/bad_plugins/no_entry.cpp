// A shared library that is not a ninfer plugin: it has no ninfer_plugin_entry.
extern "C" __attribute__((visibility("default"))) int some_other_library_function(void) { return 42; }

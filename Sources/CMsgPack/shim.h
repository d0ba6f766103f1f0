#include <msgpack.h>

#ifndef C_FERRY_ZLIB_H
#define C_FERRY_ZLIB_H

// The system's zlib (zlib1g-dev), for change-set bodies stored compressed (FerrySQLite's
// StoredBody). deflateInit2 and inflateInit2 are macros, which Swift cannot call: these
// functions stand in for them.

#include <zlib.h>

static inline int CFerryZlib_deflateInit2(z_streamp stream, int level, int windowBits, int memLevel) {
    return deflateInit2(stream, level, Z_DEFLATED, windowBits, memLevel, Z_DEFAULT_STRATEGY);
}

static inline int CFerryZlib_inflateInit2(z_streamp stream, int windowBits) {
    return inflateInit2(stream, windowBits);
}

#endif

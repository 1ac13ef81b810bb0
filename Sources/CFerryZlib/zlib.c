// (SwiftPM builds a C target from at least one source file; everything is in the header.)
#include "CFerryZlib.h"

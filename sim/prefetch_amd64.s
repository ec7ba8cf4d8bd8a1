#include "textflag.h"

// func PrefetchLine(p unsafe.Pointer)
TEXT ·PrefetchLine(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET

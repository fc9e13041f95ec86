// A pool thread's answer whose buffers go back moved, not copied (Piscina's transferable protocol).
import { Piscina } from "piscina";

/** `value` answered with `buffers` moved: each must be an ArrayBuffer the answer alone uses (ownBuffer). */
export const moved = <T>(value: T, buffers: ArrayBufferLike[]): T => Piscina.move({ [Piscina.transferableSymbol]: buffers, [Piscina.valueSymbol]: value } as never) as T;

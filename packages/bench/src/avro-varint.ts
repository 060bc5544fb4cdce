/**
 * Avro's zig-zag varints (int and long), with arithmetic instead of 32-bit operators so
 * millisecond timestamps (> 2^31) stay exact. Enough to read the first fields of a record and
 * to patch a timestamp in place without running a full encoder.
 */

/** Bytes the varint of `n` takes (a patched value must keep the template's length). */
export function varintLength(n: number): number {
  let z = n >= 0 ? n * 2 : -n * 2 - 1;
  let len = 1;
  while (z >= 128) {
    z = Math.floor(z / 128);
    len++;
  }
  return len;
}

/** Writes `n` at `offset`; returns the offset after it. */
export function writeVarint(buf: Buffer, offset: number, n: number): number {
  let z = n >= 0 ? n * 2 : -n * 2 - 1;
  while (z >= 128) {
    buf[offset++] = z % 128 | 0x80;
    z = Math.floor(z / 128);
  }
  buf[offset++] = z;
  return offset;
}

/** Reads a varint at `offset`: its value and the offset after it; undefined past the end. */
export function readVarint(buf: Buffer, offset: number): { value: number; next: number } | undefined {
  let z = 0;
  let scale = 1;
  for (let i = offset; i < buf.length && i < offset + 10; i++) {
    const b = buf[i]!;
    z += (b & 0x7f) * scale;
    scale *= 128;
    if (b < 128) return { value: z % 2 === 0 ? z / 2 : -(z + 1) / 2, next: i + 1 };
  }
  return undefined;
}

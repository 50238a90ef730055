/**
 * A small, synchronous zstd encoder for small batches (RFC 8878).
 *
 * `@mongodb-js/zstd` only compresses asynchronously, on the libuv thread
 * pool: for a batch of a few KiB the round trip to a pool thread costs more
 * than the compression, and a durable append waits for it. This encoder
 * writes one standard zstd frame (single segment, content size, no checksum)
 * holding one compressed block: greedy LZ77 matches coded as sequences with
 * the format's predefined FSE tables, and the literals stored raw. It gains
 * less than the reference encoder (no entropy-coded literals), so it is used
 * only below `SMALL_INPUT_MAX`; every zstd decoder reads its frames.
 */

/** Inputs up to this size are encoded here; larger ones go to the native encoder. */
export const SMALL_INPUT_MAX = 4 * 1024

const MIN_MATCH = 4
const HASH_LOG = 12

// Predefined distributions and code tables of RFC 8878 §3.1.1.3.2.
const LL_DISTRIBUTION = [4, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 2, 1, 1, 1, 1, 1, -1, -1, -1, -1]
const ML_DISTRIBUTION = [
  1, 4, 3, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  -1, -1, -1, -1, -1, -1, -1,
]
const OF_DISTRIBUTION = [1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1]
const LL_BASELINES = [
  0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 22, 24, 28, 32, 40, 48, 64, 128, 256, 512, 1024, 2048, 4096, 8192,
  16384, 32768, 65536,
]
const LL_EXTRA_BITS = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
const ML_BASELINES = [
  3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 37, 39, 41,
  43, 47, 51, 59, 67, 83, 99, 131, 259, 515, 1027, 2051, 4099, 8195, 16387, 32771, 65539,
]
const ML_EXTRA_BITS = [
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 7, 8, 9,
  10, 11, 12, 13, 14, 15, 16,
]

/** An FSE compression table (the tANS encoder of `FSE_buildCTable`). */
interface FseTable {
  readonly tableLog: number
  readonly stateTable: Uint16Array
  readonly deltaNbBits: Int32Array
  readonly deltaFindState: Int32Array
}

function buildFseTable(distribution: readonly number[], tableLog: number): FseTable {
  const tableSize = 1 << tableLog
  const tableMask = tableSize - 1
  const step = (tableSize >> 1) + (tableSize >> 3) + 3
  const symbols = distribution.length
  const tableSymbol = new Uint8Array(tableSize)
  const cumul = new Int32Array(symbols + 1)
  let highThreshold = tableSize - 1
  for (let s = 0; s < symbols; s++) {
    const count = distribution[s]!
    if (count === -1) {
      cumul[s + 1] = cumul[s]! + 1
      tableSymbol[highThreshold--] = s
    } else {
      cumul[s + 1] = cumul[s]! + count
    }
  }
  let position = 0
  for (let s = 0; s < symbols; s++) {
    for (let n = 0; n < distribution[s]!; n++) {
      tableSymbol[position] = s
      position = (position + step) & tableMask
      while (position > highThreshold) position = (position + step) & tableMask
    }
  }
  const stateTable = new Uint16Array(tableSize)
  const next = Int32Array.from(cumul)
  for (let u = 0; u < tableSize; u++) stateTable[next[tableSymbol[u]!]!++] = tableSize + u
  const deltaNbBits = new Int32Array(symbols)
  const deltaFindState = new Int32Array(symbols)
  let total = 0
  for (let s = 0; s < symbols; s++) {
    const count = distribution[s]!
    if (count === 0) {
      deltaNbBits[s] = ((tableLog + 1) << 16) - tableSize
    } else if (count === -1 || count === 1) {
      deltaNbBits[s] = (tableLog << 16) - tableSize
      deltaFindState[s] = total - 1
      total++
    } else {
      const maxBitsOut = tableLog - (31 - Math.clz32(count - 1))
      deltaNbBits[s] = (maxBitsOut << 16) - (count << maxBitsOut)
      deltaFindState[s] = total - count
      total += count
    }
  }
  return { tableLog, stateTable, deltaNbBits, deltaFindState }
}

const LL_TABLE = buildFseTable(LL_DISTRIBUTION, 6)
const ML_TABLE = buildFseTable(ML_DISTRIBUTION, 6)
const OF_TABLE = buildFseTable(OF_DISTRIBUTION, 5)

// Code lookup as the reference encoder does it: a table for small values, the highest set bit beyond.
const LL_SMALL_CODES = Uint8Array.from({ length: 64 }, (_, v) => codeByBaseline(LL_BASELINES, v))
const ML_SMALL_CODES = Uint8Array.from({ length: 128 }, (_, v) => codeByBaseline(ML_BASELINES, v + 3))

function codeByBaseline(baselines: readonly number[], value: number): number {
  let code = 0
  while (code + 1 < baselines.length && baselines[code + 1]! <= value) code++
  return code
}

const highBit = (v: number): number => 31 - Math.clz32(v)
const literalsCode = (length: number): number => (length > 63 ? highBit(length) + 19 : LL_SMALL_CODES[length]!)
const matchCode = (length: number): number => (length - 3 > 127 ? highBit(length - 3) + 36 : ML_SMALL_CODES[length - 3]!)

/** Little-endian bit writer into `out`, as the zstd bitstream is laid out (read back from its end). */
class BitWriter {
  #container = 0
  #bits = 0
  constructor(
    readonly out: Uint8Array,
    public at: number,
  ) {}

  add(value: number, count: number): void {
    if (count === 0) return
    this.#container = (this.#container | ((value & ((1 << count) - 1)) << this.#bits)) >>> 0
    this.#bits += count
    while (this.#bits >= 8) {
      this.out[this.at++] = this.#container & 0xff
      this.#container >>>= 8
      this.#bits -= 8
    }
  }

  /** Adds the end mark (one set bit) and pads the last byte; returns the end offset. */
  close(): number {
    this.add(1, 1)
    if (this.#bits > 0) this.out[this.at++] = this.#container & 0xff
    return this.at
  }
}

/** One FSE encoder state (`FSE_initCState2` / `FSE_encodeSymbol` / `FSE_flushCState`). */
class FseState {
  value: number
  constructor(
    readonly table: FseTable,
    symbol: number,
  ) {
    const nbBitsOut = (table.deltaNbBits[symbol]! + (1 << 15)) >> 16
    const start = (nbBitsOut << 16) - table.deltaNbBits[symbol]!
    this.value = table.stateTable[(start >> nbBitsOut) + table.deltaFindState[symbol]!]!
  }

  encode(bits: BitWriter, symbol: number): void {
    const nbBitsOut = (this.value + this.table.deltaNbBits[symbol]!) >> 16
    bits.add(this.value, nbBitsOut)
    this.value = this.table.stateTable[(this.value >> nbBitsOut) + this.table.deltaFindState[symbol]!]!
  }

  flush(bits: BitWriter): void {
    bits.add(this.value, this.table.tableLog)
  }
}

// Scratch space reused by every call (the encoder is synchronous, so calls never overlap).
// The hash table holds `base + position`; entries below the current call's
// base are stale, so it never needs clearing between calls.
const hashTable = new Int32Array(1 << HASH_LOG)
let base = 1
const literals = new Uint32Array((SMALL_INPUT_MAX >> 2) + 1)
const offsets = new Uint32Array((SMALL_INPUT_MAX >> 2) + 1)
const matches = new Uint32Array((SMALL_INPUT_MAX >> 2) + 1)
const word = (input: Uint8Array, at: number): number =>
  (input[at]! | (input[at + 1]! << 8) | (input[at + 2]! << 16) | (input[at + 3]! << 24)) >>> 0
const hash = (value: number): number => Math.imul(value, 2654435761) >>> (32 - HASH_LOG)

/** Greedy LZ77 parse: `literals[i]` bytes, then a match of `matches[i]` bytes `offsets[i]` back. Returns the number of sequences. */
function parse(input: Uint8Array, literals: Uint32Array, offsets: Uint32Array, matches: Uint32Array): number {
  if (base > 0x3fff_ffff) {
    hashTable.fill(0)
    base = 1
  }
  const callBase = base
  base += input.length + 1
  const end = input.length - MIN_MATCH
  let count = 0
  let anchor = 0
  let at = 0
  while (at <= end) {
    const value = word(input, at)
    const slot = hash(value)
    const candidate = hashTable[slot]! - callBase
    hashTable[slot] = callBase + at
    if (candidate >= 0 && word(input, candidate) === value) {
      let length = MIN_MATCH
      while (at + length < input.length && input[candidate + length] === input[at + length]) length++
      literals[count] = at - anchor
      offsets[count] = at - candidate
      matches[count] = length
      count++
      // Index a position inside the match too, so the next repetition is found.
      if (at + 2 <= end) hashTable[hash(word(input, at + 2))] = callBase + at + 2
      at += length
      anchor = at
    } else {
      at++
    }
  }
  return count
}

/** One zstd frame holding `input` (at most `SMALL_INPUT_MAX` bytes). */
export function compressSmall(input: Uint8Array): Buffer {
  const size = input.length
  if (size > SMALL_INPUT_MAX) throw new RangeError(`compressSmall takes at most ${SMALL_INPUT_MAX} bytes, got ${size}`)
  const count = parse(input, literals, offsets, matches)

  // Frame header (single segment, content size), then one block. Sized for the
  // worst case; a block that does not come out smaller than the input is stored raw.
  const out = Buffer.allocUnsafe(16 + size + 3 + 8 * count + 64)
  out.writeUInt32LE(0xfd2fb528, 0)
  let at = 5
  if (size < 256) {
    out[4] = 0x20
    out[at++] = size
  } else {
    out[4] = 0x60
    out[at++] = (size - 256) & 0xff
    out[at++] = (size - 256) >> 8
  }
  const blockHeaderAt = at
  const blockStart = at + 3
  let blockEnd = -1
  if (count > 0) {
    let p = blockStart
    let literalBytes = size
    for (let i = 0; i < count; i++) literalBytes -= matches[i]!
    // Raw literals section: every byte not covered by a match, in order.
    if (literalBytes < 32) out[p++] = literalBytes << 3
    else if (literalBytes < 4096) {
      out[p++] = 0b0100 | ((literalBytes & 0x0f) << 4)
      out[p++] = literalBytes >> 4
    } else {
      out[p++] = 0b1100 | ((literalBytes & 0x0f) << 4)
      out[p++] = (literalBytes >> 4) & 0xff
      out[p++] = literalBytes >> 12
    }
    let source = 0
    for (let i = 0; i < count; i++) {
      for (let end = source + literals[i]!; source < end; ) out[p++] = input[source++]!
      source += matches[i]!
    }
    while (source < size) out[p++] = input[source++]!
    // Sequences section: count, the predefined tables for all three codes, the FSE bitstream.
    if (count < 128) out[p++] = count
    else {
      out[p++] = (count >> 8) + 0x80
      out[p++] = count & 0xff
    }
    out[p++] = 0x00
    const bits = new BitWriter(out, p)
    const extraBits = (n: number, ll: number, ml: number, of: number): void => {
      bits.add(literals[n]! - LL_BASELINES[ll]!, LL_EXTRA_BITS[ll]!)
      bits.add(matches[n]! - ML_BASELINES[ml]!, ML_EXTRA_BITS[ml]!)
      // Offset_Value = offset + 3: never one of the repeat-offset codes 1–3.
      bits.add(offsets[n]! + 3 - (1 << of), of)
    }
    // Sequences are written last to first; the decoder reads them first to last.
    let n = count - 1
    let ll = literalsCode(literals[n]!)
    let ml = matchCode(matches[n]!)
    let of = highBit(offsets[n]! + 3)
    const mlState = new FseState(ML_TABLE, ml)
    const ofState = new FseState(OF_TABLE, of)
    const llState = new FseState(LL_TABLE, ll)
    extraBits(n, ll, ml, of)
    for (n = count - 2; n >= 0; n--) {
      ll = literalsCode(literals[n]!)
      ml = matchCode(matches[n]!)
      of = highBit(offsets[n]! + 3)
      ofState.encode(bits, of)
      mlState.encode(bits, ml)
      llState.encode(bits, ll)
      extraBits(n, ll, ml, of)
    }
    mlState.flush(bits)
    ofState.flush(bits)
    llState.flush(bits)
    blockEnd = bits.close()
  }
  const compressed = blockEnd !== -1 && blockEnd - blockStart < size
  const blockSize = compressed ? blockEnd - blockStart : size
  if (!compressed) out.set(input, blockStart)
  const blockHeader = 1 | ((compressed ? 2 : 0) << 1) | (blockSize << 3)
  out[blockHeaderAt] = blockHeader & 0xff
  out[blockHeaderAt + 1] = (blockHeader >> 8) & 0xff
  out[blockHeaderAt + 2] = blockHeader >>> 16
  return out.subarray(0, blockStart + blockSize)
}

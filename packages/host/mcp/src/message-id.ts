// Finds the top-level `id` of a JSON-RPC message fed in pieces, in constant
// memory, so a message too large to read can still be answered under its own
// id. Only bytes below 0x80 are structural in JSON, and UTF-8 never uses them
// inside a multi-byte character, so the scan works on raw bytes.

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d
const COLON = 0x3a
const COMMA = 0x2c

/** Longest id kept, in bytes as written (a longer one is not an id this server answers under). */
const ID_MAX_BYTES = 1024
/** Bytes of a key kept: only `id` matters, so a longer key is kept only as far as telling it apart. */
const KEY_MAX_BYTES = 8

function isSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d
}

/** The index of `byte` in `bytes` from `from`, or `bytes.length` when there is none. */
function indexOr(bytes: Uint8Array, byte: number, from: number): number {
  const at = bytes.indexOf(byte, from)
  return at === -1 ? bytes.length : at
}

/** A JSON-RPC request id: a string or an integer. */
export type MessageId = string | number

/**
 * Scans a message piece by piece for the `id` member of its top-level
 * object. `id` is the first such member found, when it is a string or an
 * integer of at most `ID_MAX_BYTES`; otherwise `undefined`.
 */
export class MessageIdScanner {
  #depth = 0
  #started = false
  #inString = false
  #escaped = false
  /** At depth 1: the next string is a key (after `{` or `,`), not a value. */
  #expectKey = false
  /** Bytes of the depth-1 key being read, or undefined when none is. */
  #key: number[] | undefined
  /** The last depth-1 key read was `id` and its value comes next. */
  #idValueNext = false
  /** Bytes of the id value being read, with its kind. */
  #value: { kind: 'string' | 'number'; bytes: number[] } | undefined
  #id: MessageId | undefined
  #done = false

  get id(): MessageId | undefined {
    return this.#id
  }

  feed(bytes: Uint8Array): void {
    // Inside a string that is neither a key nor the id, only a quote or a
    // backslash matters: jump to the next one (the bulk of a large message is
    // string content). The positions found are reused until passed, so each
    // piece is searched once per byte value.
    let nextQuote = -1
    let nextBackslash = -1
    let i = 0
    while (i < bytes.length && !this.#done) {
      if (this.#inString && !this.#escaped && this.#key === undefined) {
        if (nextQuote < i && nextQuote !== bytes.length) nextQuote = indexOr(bytes, QUOTE, i)
        if (nextBackslash < i && nextBackslash !== bytes.length) nextBackslash = indexOr(bytes, BACKSLASH, i)
        i = Math.min(nextQuote, nextBackslash)
        if (i === bytes.length) return
      }
      this.#step(bytes[i]!)
      i++
    }
  }

  #step(byte: number): void {
    if (!this.#started) {
      if (isSpace(byte)) return
      this.#started = true
      if (byte !== OPEN_BRACE) {
        this.#done = true
        return
      }
      this.#depth = 1
      this.#expectKey = true
      return
    }
    if (this.#value !== undefined) {
      this.#readValue(byte)
      return
    }
    if (this.#inString) {
      if (this.#escaped) this.#escaped = false
      else if (byte === BACKSLASH) this.#escaped = true
      else if (byte === QUOTE) {
        this.#inString = false
        if (this.#key !== undefined) {
          this.#idValueNext = this.#key.length === 2 && this.#key[0] === 0x69 && this.#key[1] === 0x64
          this.#key = undefined
        }
        return
      }
      if (this.#key !== undefined && this.#key.length <= KEY_MAX_BYTES) this.#key.push(byte)
      return
    }
    if (byte === QUOTE) {
      this.#inString = true
      if (this.#depth === 1 && this.#expectKey) {
        this.#key = []
        this.#expectKey = false
      } else if (this.#depth === 1 && this.#idValueNext) {
        this.#idValueNext = false
        this.#inString = false
        this.#value = { kind: 'string', bytes: [] }
      }
      return
    }
    if (isSpace(byte)) return
    if (this.#depth === 1) {
      if (byte === COLON) return
      if (byte === COMMA) {
        this.#expectKey = true
        this.#idValueNext = false
        return
      }
      if (this.#idValueNext) {
        this.#idValueNext = false
        if (byte === 0x2d || (byte >= 0x30 && byte <= 0x39)) {
          this.#value = { kind: 'number', bytes: [byte] }
          return
        }
      }
    }
    if (byte === OPEN_BRACE || byte === OPEN_BRACKET) this.#depth++
    else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      this.#depth--
      if (this.#depth === 0) this.#done = true
    }
  }

  #readValue(byte: number): void {
    const value = this.#value!
    if (value.kind === 'string') {
      if (this.#escaped) this.#escaped = false
      else if (byte === BACKSLASH) this.#escaped = true
      else if (byte === QUOTE) {
        this.#finish(value)
        return
      }
      this.#push(value, byte)
      return
    }
    if (byte === COMMA || byte === CLOSE_BRACE || isSpace(byte)) {
      this.#finish(value)
      return
    }
    this.#push(value, byte)
  }

  #push(value: { bytes: number[] }, byte: number): void {
    if (value.bytes.length >= ID_MAX_BYTES) {
      // Too long to be an id this server answers under.
      this.#value = undefined
      this.#done = true
      return
    }
    value.bytes.push(byte)
  }

  #finish(value: { kind: 'string' | 'number'; bytes: number[] }): void {
    this.#value = undefined
    this.#done = true
    const text = Buffer.from(value.bytes).toString('utf8')
    try {
      const parsed: unknown = JSON.parse(value.kind === 'string' ? `"${text}"` : text)
      if (typeof parsed === 'string' || (typeof parsed === 'number' && Number.isSafeInteger(parsed))) this.#id = parsed
    } catch {
      // Not a well-formed id: the answer goes without one.
    }
  }
}

import type { JsonValue } from './json.js'

/**
 * The content vocabulary: what a message, a tool result and a compaction
 * summary are made of. Blocks are plain lossless JSON (they travel inside
 * event data). Packages add block types by augmentation:
 * `declare module '@dsh/session' { interface ContentBlockMap { 'x': {...} } }`.
 * Declare an added block as a type alias (`type X = {...}`), not an
 * interface: event data must be assignable to JSON, which an interface is not.
 * A reader that meets a block type it does not know keeps it and skips it
 * when it renders (a renderer never guesses what an unknown block means).
 */

/**
 * Bytes of an attachment at or below this size may travel inline in the
 * reference (`data`, base64); anything larger is stored beside the session
 * and referenced by digest only, so a log line never carries large bytes.
 */
export const ATTACHMENT_INLINE_MAX_BYTES = 4096

/**
 * A content-addressed reference to attachment bytes stored beside the
 * session. The digest names the bytes; forks reference the same bytes
 * without copying them.
 */
export type AttachmentRef = {
  /** SHA-256 of the bytes, 64 lowercase hex digits. */
  readonly digest: string
  /** IANA media type, e.g. `image/png`, `application/pdf`. */
  readonly mediaType: string
  /** Byte length. */
  readonly size: number
  /** A display or file name, when the source had one. */
  readonly name?: string
  /** Intrinsic pixel size of an image, when known. */
  readonly width?: number
  readonly height?: number
  /** The bytes themselves, base64, only when `size <= ATTACHMENT_INLINE_MAX_BYTES`. */
  readonly data?: string
}

/** Plain text. */
export type TextBlock = {
  readonly type: 'text'
  readonly text: string
}

/** Model reasoning, distinct from visible text. `signature` is the provider's opaque token that lets it accept the reasoning back. */
export type ReasoningBlock = {
  readonly type: 'reasoning'
  readonly text: string
  readonly signature?: string
  /** The provider's id of the reasoning item (OpenAI Responses), which it needs beside the signature to accept the reasoning back. */
  readonly id?: string
}

/** An image, by attachment reference. */
export type ImageBlock = {
  readonly type: 'image'
  readonly attachment: AttachmentRef
}

/** A document or other file, by attachment reference. */
export type FileBlock = {
  readonly type: 'file'
  readonly attachment: AttachmentRef
}

/**
 * A tool invocation the model requested. `input` is the parsed arguments;
 * `arguments` is the raw text exactly as the model produced it, when a
 * provider streams arguments as text (kept so a request can send it back
 * byte for byte, and so unparseable arguments are not lost — then `input`
 * holds that same string).
 */
export type ToolCallBlock = {
  readonly type: 'tool-call'
  readonly id: string
  readonly name: string
  readonly input: JsonValue
  readonly arguments?: string
}

/** The result of a tool invocation, sent back to the model. `callId` pairs it with its `tool-call`. */
export type ToolResultBlock = {
  readonly type: 'tool-result'
  readonly callId: string
  readonly content: readonly ContentBlock[]
  readonly isError?: boolean
}

/** Content blocks keyed by `type`. Augment it to add a block type. */
export interface ContentBlockMap {
  text: TextBlock
  reasoning: ReasoningBlock
  image: ImageBlock
  file: FileBlock
  'tool-call': ToolCallBlock
  'tool-result': ToolResultBlock
}

export type ContentBlockType = keyof ContentBlockMap & string

/** Any known content block; switch on `type` and fall through unknowns (the map is extensible). */
export type ContentBlock = ContentBlockMap[ContentBlockType]

/** The block types this package defines (a reader's "known" set before augmentation). */
export const CORE_BLOCK_TYPES: readonly ContentBlockType[] = Object.freeze([
  'text',
  'reasoning',
  'image',
  'file',
  'tool-call',
  'tool-result',
])

/**
 * Token counts of one model call. Kinds are disjoint: `input` is uncached
 * input only (cached input is `cacheRead`/`cacheWrite`), `reasoning` is not
 * part of `output`.
 */
export type TokenUsage = {
  readonly input: number
  readonly output: number
  readonly cacheRead?: number
  readonly cacheWrite?: number
  readonly reasoning?: number
}

/** Why a model call stopped. */
export type StepFinish = 'stop' | 'tool-calls' | 'max-tokens' | 'aborted' | 'error'

export const STEP_FINISHES: readonly StepFinish[] = Object.freeze(['stop', 'tool-calls', 'max-tokens', 'aborted', 'error'])

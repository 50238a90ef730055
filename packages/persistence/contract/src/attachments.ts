import { ATTACHMENT_INLINE_MAX_BYTES, type AttachmentRef } from '@dsh/session'
import { persistenceError } from './errors.js'
import type { AttachmentPutOptions } from './types.js'
import { checkId } from './validate.js'

/** The default cap on one attachment's bytes (20 MiB); a backend option changes it. */
export const ATTACHMENT_MAX_BYTES = 20 * 1024 * 1024

/** Bytes checked for storing: the digest that names them, the reference to hand back. */
export interface CheckedAttachment {
  readonly bytes: Buffer
  readonly digest: string
  readonly ref: AttachmentRef
}

const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*(\s*;.*)?$/i
const DIGEST = /^[0-9a-f]{64}$/

/**
 * Checks what `putAttachment` was given and computes its SHA-256: bytes that
 * are not a `Uint8Array` or a media type that is not `type/subtype` is
 * `SESSION_PERSISTENCE_INVALID_ATTACHMENT`; more than `maxBytes` bytes is
 * `SESSION_PERSISTENCE_ATTACHMENT_TOO_LARGE` (checked before anything is
 * hashed or written). The reference carries the bytes inline (`data`) at or
 * below `ATTACHMENT_INLINE_MAX_BYTES`, and only the digest above it.
 */
export function checkAttachment(
  sessionId: string,
  bytes: Uint8Array,
  options: AttachmentPutOptions,
  maxBytes: number = ATTACHMENT_MAX_BYTES,
): CheckedAttachment {
  if (!(bytes instanceof Uint8Array)) {
    throw persistenceError(
      'SESSION_PERSISTENCE_INVALID_ATTACHMENT',
      `putAttachment needs the bytes as a Uint8Array (a Buffer), got ${typeof bytes}.`,
      {
        details: { id: sessionId },
      },
    )
  }
  const mediaType = options?.mediaType
  if (typeof mediaType !== 'string' || mediaType.length > 255 || !MEDIA_TYPE.test(mediaType)) {
    throw persistenceError(
      'SESSION_PERSISTENCE_INVALID_ATTACHMENT',
      `putAttachment needs a media type of the form type/subtype (e.g. image/png), got ${JSON.stringify(mediaType)}.`,
      { details: { id: sessionId } },
    )
  }
  if (options.name !== undefined && typeof options.name !== 'string') {
    throw persistenceError('SESSION_PERSISTENCE_INVALID_ATTACHMENT', 'An attachment name must be a string.', { details: { id: sessionId } })
  }
  if (bytes.byteLength > maxBytes) {
    throw persistenceError(
      'SESSION_PERSISTENCE_ATTACHMENT_TOO_LARGE',
      `The attachment is ${bytes.byteLength} bytes, over the cap of ${maxBytes} bytes; nothing was stored. Send a smaller file, or open the backend with a larger attachmentMaxBytes.`,
      { details: { id: sessionId, size: bytes.byteLength, maxBytes } },
    )
  }
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const digest = sha256Hex(buffer)
  const ref: AttachmentRef = {
    digest,
    mediaType,
    size: buffer.length,
    ...(options.name === undefined ? {} : { name: options.name }),
    ...(buffer.length <= ATTACHMENT_INLINE_MAX_BYTES ? { data: buffer.toString('base64') } : {}),
  }
  return { bytes: buffer, digest, ref }
}

/** A digest as `readAttachment` takes it: 64 lowercase hex digits, else `SESSION_PERSISTENCE_INVALID_ATTACHMENT`. */
export function checkDigest(sessionId: string, digest: string): string {
  if (typeof digest !== 'string' || !DIGEST.test(digest)) {
    throw persistenceError(
      'SESSION_PERSISTENCE_INVALID_ATTACHMENT',
      `An attachment digest is 64 lowercase hex digits (SHA-256), got ${JSON.stringify(String(digest).slice(0, 80))}.`,
      { details: { id: sessionId } },
    )
  }
  return digest
}

/** A cap as a backend option gives it: a positive safe integer, else `SESSION_PERSISTENCE_INVALID_OPTION`. */
export function checkAttachmentCap(maxBytes: number | undefined): number {
  if (maxBytes === undefined) return ATTACHMENT_MAX_BYTES
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) {
    throw persistenceError(
      'SESSION_PERSISTENCE_INVALID_OPTION',
      `attachmentMaxBytes must be a positive whole number of bytes, got ${String(maxBytes)}.`,
    )
  }
  return maxBytes
}

/** Whether `bytes` are the ones `digest` names (a stored copy is checked on every read). */
export function digestMatches(bytes: Uint8Array, digest: string): boolean {
  return sha256Hex(bytes) === digest
}

/** `SESSION_PERSISTENCE_ATTACHMENT_NOT_FOUND` for a digest the session cannot read. */
export function attachmentNotFound(sessionId: string, digest: string): Error {
  return persistenceError(
    'SESSION_PERSISTENCE_ATTACHMENT_NOT_FOUND',
    `Session '${sessionId}' holds no attachment ${digest.slice(0, 12)}… (neither stored with it nor inherited from the session it forks); store it with putAttachment first.`,
    { details: { id: sessionId, digest } },
  )
}

/** SHA-256 in lowercase hex; node:crypto is loaded on the first call, not when this module is imported. */
export function sha256Hex(bytes: Uint8Array): string {
  return process.getBuiltinModule('node:crypto').createHash('sha256').update(bytes).digest('hex')
}

/** The session an attachment call names: a non-empty string within the id cap, else `SESSION_PERSISTENCE_INVALID_ID`. */
export function checkAttachmentSession(sessionId: string): void {
  if (typeof sessionId !== 'string' || sessionId.length === 0)
    throw persistenceError(
      'SESSION_PERSISTENCE_INVALID_ID',
      `An attachment belongs to a session: give its id, got ${JSON.stringify(sessionId)}.`,
    )
  checkId(sessionId)
}

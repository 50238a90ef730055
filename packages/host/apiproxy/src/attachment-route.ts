import { isDshError } from '@dsh/context'
import { idParam } from '@dsh/protocol'
import type { AnswerQueue } from './answers.js'
import { ApiError } from './errors.js'
import { BASE_HEADERS } from './http.js'
import { isListedChild, isNotFound, isSubagent } from './owner.js'
import { unknownQueryParameter } from './request.js'
import type { Route } from './route.js'
import type { ApiServices } from './services.js'

/** The image types answered inline (by their leading bytes, never by a name or a caller's claim); anything else is a download. */
const INLINE_IMAGES: readonly { readonly type: string; readonly magic: readonly number[] }[] = [
  { type: 'image/png', magic: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] },
  { type: 'image/jpeg', magic: [0xff, 0xd8, 0xff] },
  { type: 'image/gif', magic: [0x47, 0x49, 0x46, 0x38] },
]

/** `image/webp`: `RIFF????WEBP`. */
function isWebp(bytes: Uint8Array): boolean {
  const tag = (at: number, text: string) => [...text].every((c, i) => bytes[at + i] === c.charCodeAt(0))
  return bytes.length >= 12 && tag(0, 'RIFF') && tag(8, 'WEBP')
}

/** The content type an attachment is answered with: a raster image its bytes prove, else `application/octet-stream` as a download. */
export function attachmentContentType(bytes: Uint8Array): { readonly type: string; readonly inline: boolean } {
  for (const { type, magic } of INLINE_IMAGES) if (magic.every((b, i) => bytes[i] === b)) return { type, inline: true }
  if (isWebp(bytes)) return { type: 'image/webp', inline: true }
  return { type: 'application/octet-stream', inline: false }
}

const DIGEST = /^[0-9a-f]{64}$/

function readIds(captures: Readonly<Record<string, string>>, names: readonly string[]): Record<string, string> {
  const ids: Record<string, string> = {}
  for (const name of names) {
    const parsed = idParam.safeParse(captures[name])
    if (!parsed.success) throw new ApiError('API_BAD_REQUEST', `The path parameter "${name}" is not a session id.`)
    ids[name] = parsed.data
  }
  const digest = captures.digest ?? ''
  if (!DIGEST.test(digest)) throw new ApiError('API_BAD_REQUEST', 'An attachment is named by its SHA-256 digest: 64 lowercase hex digits.')
  ids.digest = digest
  return ids
}

async function readBytes(services: ApiServices, sessionId: string, digest: string, signal: AbortSignal, notFound: () => ApiError) {
  const read = services.sessionPersistence?.readAttachment
  if (read === undefined)
    throw new ApiError('API_SERVICE_UNAVAILABLE', "This server's persistence stores no attachments (no readAttachment).")
  try {
    return await read.call(services.sessionPersistence, sessionId, digest, signal)
  } catch (error) {
    if (
      isDshError(error, 'SESSION_PERSISTENCE_ATTACHMENT_NOT_FOUND') ||
      isDshError(error, 'SESSION_PERSISTENCE_NOT_FOUND') ||
      isNotFound(error)
    )
      throw notFound()
    throw error
  }
}

function sendBytes(res: import('node:http').ServerResponse, bytes: Uint8Array, digest: string, answers: AnswerQueue): void {
  const { type, inline } = attachmentContentType(bytes)
  answers.reserve(res, bytes.byteLength)
  res.writeHead(200, {
    ...BASE_HEADERS,
    'Content-Type': type,
    'Content-Length': String(bytes.byteLength),
    // The digest is hex only, so the name needs no quoting beyond this.
    'Content-Disposition': `${inline ? 'inline' : 'attachment'}; filename="${digest.slice(0, 16)}"`,
    // Bytes, never a document: nothing in them runs, even opened directly.
    'Content-Security-Policy': "default-src 'none'; sandbox",
    'Cross-Origin-Resource-Policy': 'same-origin',
  })
  res.end(bytes)
}

/**
 * `GET /api/sessions/:id/attachments/:digest`: the bytes of an attachment of
 * a session that is not a subagent, with the same owner check as its history
 * (before the read, and again after it).
 * Accepts `?token=` so the page can show an image with `<img src>`. The
 * content type comes from the bytes: PNG, JPEG, GIF and WebP inline, anything
 * else (SVG and HTML included) as an `application/octet-stream` download,
 * always with `nosniff` and a sandboxing CSP.
 */
export const attachmentRoute: Route = {
  path: '/api/sessions/:id/attachments/:digest',
  auth: 'header-or-query',
  async serve({ res, services, signal, answers }, captures, query) {
    refuseQuery(query)
    const { id, digest } = readIds(captures, ['id']) as { id: string; digest: string }
    const notFound = () => new ApiError('API_NOT_FOUND', `Session '${id}' holds no attachment ${digest.slice(0, 12)}….`)
    const forbidden = () =>
      new ApiError(
        'API_FORBIDDEN',
        `Session '${id}' is a subagent; its attachments are served only through its parent's catalog: GET /api/sessions/{parentId}/subagents/{childId}/attachments/{digest}.`,
      )
    if (await isSubagent(services, id, signal)) throw forbidden()
    const bytes = await readBytes(services, id, digest, signal, notFound)
    // Bytes carry no header: the owner check is asked again once they are read (the id may have been republished meanwhile).
    if (await isSubagent(services, id, signal)) throw forbidden()
    sendBytes(res, bytes, digest, answers)
  },
}

/**
 * `GET /api/sessions/:parentId/subagents/:childId/attachments/:digest`: a
 * child's attachment, through its parent's catalog only, checked before the
 * read and again after it (a refusal is the same 404 as a missing one).
 */
export const childAttachmentRoute: Route = {
  path: '/api/sessions/:parentId/subagents/:childId/attachments/:digest',
  auth: 'header-or-query',
  async serve({ res, services, signal, answers }, captures, query) {
    refuseQuery(query)
    const { parentId, childId, digest } = readIds(captures, ['parentId', 'childId']) as {
      parentId: string
      childId: string
      digest: string
    }
    const notFound = () => new ApiError('API_NOT_FOUND', `Session '${parentId}' has no subagent '${childId}' with that attachment.`)
    if (!(await isListedChild(services.sessionQuery, parentId, childId, signal))) throw notFound()
    const bytes = await readBytes(services, childId, digest, signal, notFound)
    if (!(await isListedChild(services.sessionQuery, parentId, childId, signal))) throw notFound()
    sendBytes(res, bytes, digest, answers)
  },
}

function refuseQuery(query: Readonly<Record<string, string>>): void {
  const unknown = Object.keys(query).find((name) => name !== 'token')
  if (unknown !== undefined) throw unknownQueryParameter(unknown, 'an attachment')
}

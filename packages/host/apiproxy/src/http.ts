import type { IncomingMessage, ServerResponse } from 'node:http'
import { DshError } from '@dsh/context'
import type { AnswerQueue } from './answers.js'
import type { ErrorResponse } from './error-response.js'
import { ApiError } from './errors.js'

/** Headers on every answer: nothing is cacheable, nothing is sniffed, nothing is framed. */
export const BASE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
})

/** Answers `body` as JSON; with `answers`, its bytes count against the bound of unread answers (`API_BUSY` past it, nothing written). */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  extraHeaders: Record<string, string> = {},
  answers?: AnswerQueue,
): void {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const text = JSON.stringify(body)
  answers?.reserve(res, Buffer.byteLength(text))
  res.writeHead(status, {
    ...BASE_HEADERS,
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': String(Buffer.byteLength(text)),
    ...extraHeaders,
  })
  res.end(text)
}

export function sendError(res: ServerResponse, error: ErrorResponse, extraHeaders: Record<string, string> = {}): void {
  sendJson(res, error.status, error.body, extraHeaders)
}

/**
 * Reads and discards a request body of at most `maxBytes` (no route takes a
 * body). A declared length over the limit is refused before a byte is read;
 * a chunked body is counted as it arrives.
 */
export async function drainBody(req: IncomingMessage, maxBytes: number): Promise<void> {
  const declared = req.headers['content-length']
  if (declared !== undefined) {
    const length = /^[0-9]{1,16}$/.test(declared) ? Number(declared) : Number.NaN
    if (!Number.isSafeInteger(length)) throw new ApiError('API_BAD_REQUEST', 'The Content-Length header is not a valid length.')
    if (length > maxBytes) throw tooLarge(maxBytes)
    if (length === 0) return
  } else if (req.headers['transfer-encoding'] === undefined) {
    return
  }
  let received = 0
  try {
    for await (const chunk of req) {
      received += (chunk as Buffer).length
      if (received > maxBytes) throw tooLarge(maxBytes)
    }
  } catch (error) {
    // The client went away (or ran out of its request time) mid-body: nobody is left to answer, and the host did not fail.
    if (req.destroyed && !(error instanceof ApiError))
      throw new DshError('CANCELLED', 'The client closed the connection before its request body was complete.', { cause: error })
    throw error
  }
}

function tooLarge(maxBytes: number): ApiError {
  return new ApiError(
    'API_PAYLOAD_TOO_LARGE',
    `The request body is larger than ${maxBytes} bytes. This API takes no request bodies; send parameters in the query.`,
  )
}

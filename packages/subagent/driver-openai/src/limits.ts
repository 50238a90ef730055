import { type DshError, textHead } from '@dsh/context'
import { EVENT_MAX_BYTES } from '@dsh/session/limits'

/**
 * Characters (UTF-16 units) one model step may stream, its text, reasoning,
 * tool names and arguments together. A step's text goes whole into one
 * `assistant/message` (an Anthropic step's tool inputs twice, parsed and
 * raw), and a store refuses an event over `EVENT_MAX_BYTES` (16 MiB): a
 * session holding one could never be persisted again. At 6 bytes a
 * character (a JSON `\u` escape), twice over, this stays below it; the
 * longest answers models give (128k output tokens) are a fraction of it.
 */
export const STEP_MAX_CHARS = 1_048_576

/**
 * UTF-8 bytes of a tool result's JSON the driver logs. A result goes into one
 * `tool/result {turn, callId, content}` event, and a store refuses an event
 * over `EVENT_MAX_BYTES`; half of it leaves room for the call id (the model's,
 * within its step's `STEP_MAX_CHARS`, at 6 bytes a character escaped) and the
 * event's envelope. A larger result is logged as a `TOOL_RESULT_TOO_LARGE`
 * error result.
 */
export const TOOL_RESULT_MAX_BYTES = EVENT_MAX_BYTES / 2

/** Tool calls (Chat's `index`, Responses' function call items) or content blocks (Anthropic's `index`) one step may hold. */
export const STEP_MAX_PARTS = 256

/** The typed errors a bound throws, in the driver's own class. */
export interface StepBoundErrors {
  /** Past a bound (`…_RESPONSE_TOO_LARGE`). */
  readonly tooLarge: (message: string) => DshError
  /** A stream that breaks the protocol (`…_REQUEST_FAILED`). */
  readonly malformed: (message: string) => DshError
}

/** Counts what one streamed step holds and throws the driver's typed error past `STEP_MAX_CHARS` or `STEP_MAX_PARTS`. */
export class StepBound {
  readonly #errors: StepBoundErrors
  #chars = 0

  constructor(errors: StepBoundErrors) {
    this.#errors = errors
  }

  /** Counts `text` against the step's characters; call it before the text is kept or passed on. */
  take(text: string): void {
    this.#chars += text.length
    if (this.#chars > STEP_MAX_CHARS) {
      throw this.#errors.tooLarge(
        `The model's response passed ${STEP_MAX_CHARS} characters in one step (STEP_MAX_CHARS), more than one logged event may hold; it was stopped there. Lower max_tokens or ask for a shorter answer.`,
      )
    }
  }

  /** A part's position as the server sent it: an integer from 0 below `STEP_MAX_PARTS`. */
  part(index: unknown, what: string): number {
    if (typeof index !== 'number' || !Number.isSafeInteger(index) || index < 0) {
      throw this.#errors.malformed(
        `The model server sent a ${what} index that is not a non-negative integer: ${boundedText(String(index), 40)}.`,
      )
    }
    if (index >= STEP_MAX_PARTS) {
      throw this.#errors.tooLarge(`The model's response held more than ${STEP_MAX_PARTS} ${what}s in one step (STEP_MAX_PARTS).`)
    }
    return index
  }
}

/**
 * Characters of a message from outside the driver (a server's error, a
 * library's exception) its typed error keeps, after redaction: enough to act
 * on, never a whole answer, however much the server sent.
 */
export const ERROR_TEXT_MAX_CHARS = 500

/** `text` cut to `max` characters (never inside a surrogate pair), an ellipsis marking the cut. */
export function boundedText(text: string, max = ERROR_TEXT_MAX_CHARS): string {
  return text.length > max ? `${textHead(text, max)}…` : text
}

/**
 * `text` as a sentence that ends with exactly one period, so a server's
 * message ("Connection error.") can be followed by the driver's advice: a
 * trailing period (or several) is replaced by one, a trailing `?`, `!` or
 * `…` is kept as it is.
 */
export function sentence(text: string): string {
  const trimmed = text.trimEnd().replace(/\.+$/, '')
  return /[?!…]$/.test(trimmed) ? trimmed : `${trimmed}.`
}

/** What a request whose stream broke after output was recorded says (it is not retried): `cause` is why it broke. */
export function brokenAfterOutput(cause: string): string {
  return `The model stream broke after output was recorded (not retried, so nothing is logged twice): ${cause}`
}

/** The typed errors of a request whose deadline ran out, in the driver's own class, and who the messages say was silent. */
export interface DeadlineErrors {
  /** Who sent nothing, as a sentence begins with it (`The model server`, `The Anthropic API`). */
  readonly server: string
  /** The stream broke after output was recorded, so it is not retried (`…_REQUEST_FAILED`). */
  readonly broken: (message: string) => DshError
  /** Nothing was recorded, so the request was retried like a lost connection until the attempts ran out (`…_CONNECTION`). */
  readonly silent: (message: string) => DshError
}

/** A request's own signal: aborted by the caller's, or once the server has sent nothing for `ms`. */
export interface RequestDeadline {
  readonly signal: AbortSignal
  /** Something arrived from the server (a streamed chunk): the `ms` start again. */
  progress(): void
  /** Whether the time ran out (and the caller had not aborted first). */
  expired(): boolean
  /** Stops the timer (call it when the request settles). */
  clear(): void
  /** The typed error of the time running out, after `attempts` attempts; `emitted` says whether output was recorded. */
  timedOut(attempts: number, emitted: boolean): DshError
}

/**
 * A deadline over the silences of one request: until its response headers,
 * and between its streamed chunks (an SDK's own `timeout` ends when the
 * headers arrive, so a server that stalls mid-stream would hold a turn for
 * ever). It restarts at every chunk (`progress`), so a long answer that keeps
 * streaming is never cut: what bounds a step's length is `STEP_MAX_CHARS`.
 * A fresh signal per request also keeps the SDK's abort listener off the
 * caller's signal, which would otherwise collect one per step.
 */
export function requestDeadline(caller: AbortSignal, ms: number, errors: DeadlineErrors): RequestDeadline {
  const timer = new AbortController()
  let expired = false
  const handle = setTimeout(() => {
    expired = !caller.aborted
    timer.abort()
  }, ms)
  return {
    signal: AbortSignal.any([caller, timer.signal]),
    progress: () => {
      if (!timer.signal.aborted) handle.refresh()
    },
    expired: () => expired,
    clear: () => clearTimeout(handle),
    timedOut: (attempts, emitted) => {
      const what = `nothing for ${ms} ms (timeoutMs)`
      if (emitted) return errors.broken(`${brokenAfterOutput(what)}.`)
      const tries = attempts === 1 ? '' : ` after ${attempts} attempts`
      return errors.silent(`${errors.server} sent ${what}${tries}. Check that the server is responding.`)
    },
  }
}

/**
 * Bytes of an error answer's body (a non-2xx status) a client reads. The
 * SDKs read such a body whole into memory to build their error, and a server
 * or a proxy before it may answer with a body of any length, or one that
 * never ends; providers' error bodies are a short JSON object, and the
 * drivers show `ERROR_TEXT_MAX_CHARS` of its message.
 */
export const ERROR_BODY_MAX_BYTES = 65_536

/**
 * `fetch` for the SDK clients: a 2xx response is passed on untouched, and
 * any other response with a body is handed on with its status, status text
 * and headers and a body that ends after `ERROR_BODY_MAX_BYTES` bytes; the
 * rest of the server's body is cancelled, which closes the connection. The
 * SDKs then build their typed error from the bounded text, and their
 * retry checks read the status and headers as before.
 */
export async function fetchWithBoundedErrors(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const response = await fetch(input, init)
  if (response.body === null) return response
  if (response.ok) return isEventStream(response.headers) ? response : keepingHead(response, response.body)
  const { status } = response
  // A Response can be built with a status from 200 to 599 only; a server may send any three digits.
  const bounded = new Response(boundedBody(response.body, ERROR_BODY_MAX_BYTES), {
    status: Math.min(status, 599),
    statusText: response.statusText,
    headers: response.headers,
  })
  if (status > 599) Object.defineProperty(bounded, 'status', { value: status })
  return bounded
}

/** The first `max` bytes of `body`, read as they are asked for; the rest is cancelled. */
function boundedBody(body: ReadableStream<Uint8Array>, max: number): ReadableStream<Uint8Array> {
  const reader = body.getReader()
  let left = max
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const { done, value } = await reader.read()
        if (done) return controller.close()
        if (value.byteLength < left) {
          left -= value.byteLength
          return controller.enqueue(value)
        }
        controller.enqueue(value.subarray(0, left))
        left = 0
        controller.close()
        // What the reader was not given is never read: cancelling the body releases its connection.
        await reader.cancel().catch(() => undefined)
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  )
}

/** Bytes of a 2xx reply that is not an event stream kept for the error that says what it was. */
export const REPLY_HEAD_BYTES = 120

/** The content type and first bytes of the 2xx replies that were not event streams, by the response handed to the SDK. */
const replyHeads = new WeakMap<Response, { readonly contentType: string | null; head: Uint8Array; more: boolean }>()

function isEventStream(headers: Headers): boolean {
  return (headers.get('content-type') ?? '').split(';', 1)[0]?.trim().toLowerCase() === 'text/event-stream'
}

/**
 * `response` with a body passed on whole, as it is read, whose first
 * `REPLY_HEAD_BYTES` bytes are kept for {@link notAnEventStream}: a server
 * may stream events under another content type, so the reply is read as a
 * stream all the same, and only a stream that ends unfinished says what it was.
 */
function keepingHead(response: Response, body: ReadableStream<Uint8Array>): Response {
  const kept = { contentType: response.headers.get('content-type'), head: new Uint8Array(0), more: false }
  const reader = body.getReader()
  const passed = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const { done, value } = await reader.read()
        if (done) return controller.close()
        const room = REPLY_HEAD_BYTES - kept.head.byteLength
        if (value.byteLength > room) kept.more = true
        if (room > 0) kept.head = Buffer.concat([kept.head, value.subarray(0, room)])
        controller.enqueue(value)
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  )
  const out = new Response(passed, { status: response.status, statusText: response.statusText, headers: response.headers })
  Object.defineProperty(out, 'url', { value: response.url })
  replyHeads.set(out, kept)
  return out
}

/**
 * What a 2xx reply was when it was not an event stream (its `content-type`
 * is not `text/event-stream`): the content type and the first bytes of its
 * body, quoted and escaped (see {@link escapedHead}). Undefined for an event
 * stream or a response that did not come through {@link fetchWithBoundedErrors}.
 */
export function notAnEventStream(response: Response | undefined): string | undefined {
  const kept = response === undefined ? undefined : replyHeads.get(response)
  if (kept === undefined) return undefined
  const type = kept.contentType === null ? 'no content-type' : `content-type ${escapedHead(kept.contentType, 60, false)}`
  if (kept.head.byteLength === 0) return `${type}, an empty body`
  return `${type}, a body beginning ${escapedHead(new TextDecoder().decode(kept.head), REPLY_HEAD_CHARS, kept.more)}`
}

/** Characters of a reply's escaped first bytes an error shows (an escape counts its length). */
export const REPLY_HEAD_CHARS = 160

/**
 * `text` in double quotes, with quotes, backslashes and every character
 * outside printable ASCII escaped (`\n`, `\u001b`: nothing a terminal acts
 * on), cut between escapes at `max` characters; an ellipsis after the quote
 * marks a cut, or `more` text that was not kept.
 */
function escapedHead(text: string, max: number, more: boolean): string {
  let out = ''
  for (const char of text) {
    const code = char.codePointAt(0) as number
    const piece =
      char === '"' || char === '\\'
        ? `\\${char}`
        : char === '\n'
          ? '\\n'
          : code >= 0x20 && code <= 0x7e
            ? char
            : Array.from({ length: char.length }, (_, i) => `\\u${char.charCodeAt(i).toString(16).padStart(4, '0')}`).join('')
    if (out.length + piece.length > max) return `"${out}"…`
    out += piece
  }
  return `"${out}"${more ? '…' : ''}`
}

import { connect, type Socket } from 'node:net'

export interface RawResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

/** Splits one response head (status line and header lines) into status and lower-cased headers. */
function parseHead(head: string): { status: number; headers: Record<string, string> } {
  const [statusLine, ...headerLines] = head.split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of headerLines) {
    const colon = line.indexOf(':')
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  return { status: Number(statusLine!.split(' ')[1]), headers }
}

/**
 * Sends bytes over a plain TCP socket and reads the answer until the server
 * closes the connection: for request targets `fetch` would normalize and for
 * bodies the host must refuse before reading them.
 */
export function rawRequest(baseUrl: string, head: string, body?: string | Buffer): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname)
    const chunks: Buffer[] = []
    socket.on('data', (chunk) => chunks.push(chunk))
    // The host may close while we are still sending a refused body.
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE' && error.code !== 'ECONNRESET') reject(error)
    })
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const split = text.indexOf('\r\n\r\n')
      if (split === -1) {
        reject(new Error(`no HTTP answer: ${JSON.stringify(text)}`))
        return
      }
      resolve({ ...parseHead(text.slice(0, split)), body: text.slice(split + 4) })
    })
    socket.write(head)
    if (body !== undefined) socket.write(body)
  })
}

/** A GET with the raw target exactly as given. */
export function rawGet(baseUrl: string, target: string, token: string | undefined): Promise<RawResponse> {
  const auth = token === undefined ? '' : `Authorization: Bearer ${token}\r\n`
  return rawRequest(baseUrl, `GET ${target} HTTP/1.1\r\nHost: ${new URL(baseUrl).host}\r\n${auth}Connection: close\r\n\r\n`)
}

/**
 * One TCP connection that reads answers one at a time (each framed by its
 * `Content-Length`), so a test can send several requests on it, stall halfway
 * through one, or just hold it open. It never closes its own side unless told
 * to (`allowHalfOpen`): whether the socket goes away is the server's doing.
 */
export class RawConnection {
  readonly socket: Socket
  /** Resolves when the server ends its side (FIN) or the connection is reset or closed. */
  readonly ended: Promise<void>
  /** Resolves when the socket is fully closed. */
  readonly closed: Promise<void>
  readonly #host: string
  #buffer = Buffer.alloc(0)
  #ended = false
  #failure: Error | undefined
  #wake: () => void = () => {}

  constructor(baseUrl: string) {
    const { hostname, port, host } = new URL(baseUrl)
    this.#host = host
    this.socket = connect({ port: Number(port), host: hostname, allowHalfOpen: true })
    this.socket.on('data', (chunk: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, chunk])
      this.#wake()
    })
    // A server that closes with our unread bytes in its buffer resets the connection; what it answered before is still read.
    this.socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'ECONNRESET' && error.code !== 'EPIPE') this.#failure = error
    })
    let ended!: () => void
    this.ended = new Promise((resolve) => (ended = resolve))
    const end = () => {
      this.#ended = true
      ended()
      this.#wake()
    }
    this.socket.once('end', end)
    this.socket.once('close', end)
    this.closed = new Promise((resolve) => this.socket.once('close', () => resolve()))
  }

  /** A GET with `Host` set to the server's address; keep-alive unless the caller adds `Connection: close`. */
  get(target: string, headers: Record<string, string> = {}): void {
    const lines = Object.entries({ Host: this.#host, ...headers }).map(([name, value]) => `${name}: ${value}\r\n`)
    this.socket.write(`GET ${target} HTTP/1.1\r\n${lines.join('')}\r\n`)
  }

  /** The next complete answer on the connection; rejects when the connection ends before one arrives. */
  async response(): Promise<RawResponse> {
    for (;;) {
      if (this.#failure !== undefined) throw this.#failure
      const split = this.#buffer.indexOf('\r\n\r\n')
      if (split !== -1) {
        const { status, headers } = parseHead(this.#buffer.subarray(0, split).toString('utf8'))
        const length = Number(headers['content-length'] ?? Number.NaN)
        if (!Number.isSafeInteger(length)) throw new Error(`answer without a Content-Length: ${JSON.stringify(headers)}`)
        if (this.#buffer.length >= split + 4 + length) {
          const body = this.#buffer.subarray(split + 4, split + 4 + length).toString('utf8')
          this.#buffer = this.#buffer.subarray(split + 4 + length)
          return { status, headers, body }
        }
      }
      if (this.#ended) throw new Error(`the connection ended before a whole answer: ${JSON.stringify(this.#buffer.toString('utf8'))}`)
      await new Promise<void>((resolve) => (this.#wake = resolve))
    }
  }
}

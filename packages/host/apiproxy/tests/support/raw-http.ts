import { connect } from 'node:net'

export interface RawResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
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
      const [statusLine, ...headerLines] = text.slice(0, split).split('\r\n')
      const headers: Record<string, string> = {}
      for (const line of headerLines) {
        const colon = line.indexOf(':')
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
      }
      resolve({ status: Number(statusLine!.split(' ')[1]), headers, body: text.slice(split + 4) })
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

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach } from 'vitest'

/**
 * Real HTTP servers on 127.0.0.1 for one test file: `serve(handler)` starts
 * one and answers its base URL; every server started by a test is closed
 * after it (open connections cut).
 */
export function localServers(): { serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> } {
  const servers: Server[] = []
  afterEach(async () => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })
  return {
    async serve(handler) {
      const server = createServer(handler)
      servers.push(server)
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    },
  }
}

import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import { createMcpServer } from '../src/index.js'

/** A real MCP SDK client connected to a new server over `services`, through a linked in-memory transport pair. */
export async function connectClient(
  services: Parameters<typeof createMcpServer>[0],
  options: Parameters<typeof createMcpServer>[1] = {},
): Promise<Client> {
  const server = createMcpServer(services, options)
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await server.connect(serverSide)
  const client = new Client({ name: 'test', version: '1.0.0' })
  await client.connect(clientSide)
  return client
}

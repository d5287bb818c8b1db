"""RocketMQ's remoting protocol (the 4.x clients' wire format): ``RemotingCommand`` frames, their codes, and an
asyncio server that answers them. Shared by the name server and the broker."""

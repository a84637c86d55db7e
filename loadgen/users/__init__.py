"""The load's participants: producers and consumers, each over its AMQP link (loadgen.amqp.link)."""

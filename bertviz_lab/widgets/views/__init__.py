"""Views: anywidget classes that show one figure and hold, in buffers, what its front end needs to answer a hover
or a key without the kernel. They know no panels."""
